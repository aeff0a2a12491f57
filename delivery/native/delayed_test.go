package native

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

// TestDelayedEventFansOutWhenDue: an event with delay or ts is acknowledged at once with
// scheduledFor and no runs, starts its run exactly then (not a moment earlier), wakes
// waiters then, and shows its runs on GET /events/{id} afterwards; one whose time passed
// while the server was down fans out at start-up, once, and one still ahead at a restart
// fans out on time.
func TestDelayedEventFansOutWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ep := &timedEndpoint{}
		n, stop := bubbleNodeWith(t, dir, ep)
		n.register(t, "app", `{"workflows": [{"name": "w", "url": "http://x.test/w", "triggers": [{"event": "e"}]}]}`)
		t0 := time.Now()
		offsets := func(from time.Time) []time.Duration {
			var out []time.Duration
			for _, at := range ep.times() {
				out = append(out, at.Sub(from))
			}
			return out
		}

		in := ev("e", `{"n": 1}`, "")
		in.Delay = 3 * time.Second
		res := n.send(t, in)
		require.Equal(t, t0.Add(3*time.Second).UnixMilli(), res[0].ScheduledFor)
		require.Empty(t, res[0].Runs)
		got, err := n.svc.Event(context.Background(), project, res[0].ID)
		require.NoError(t, err)
		require.True(t, got.Pending)
		require.Equal(t, res[0].ScheduledFor, got.ScheduledFor)
		require.Empty(t, got.Runs)

		time.Sleep(3*time.Second - time.Millisecond)
		synctest.Wait()
		require.Empty(t, ep.times(), "nothing before the delay")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []time.Duration{3 * time.Second}, offsets(t0))
		got, err = n.svc.Event(context.Background(), project, res[0].ID)
		require.NoError(t, err)
		require.False(t, got.Pending)
		require.Len(t, got.Runs, 1)
		require.NotEmpty(t, got.Runs[0].RunID)

		// ts in the future works the same; a ts already past is an event for now.
		t1 := time.Now()
		at := ev("e", `{"n": 2}`, "")
		at.Ts = t1.Add(2 * time.Second).UnixMilli()
		past := ev("e", `{"n": 3}`, "")
		past.Ts = t1.Add(-time.Hour).UnixMilli()
		res = n.send(t, at, past)
		require.Equal(t, at.Ts, res[0].ScheduledFor)
		require.Zero(t, res[1].ScheduledFor)
		require.Len(t, res[1].Runs, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []time.Duration{0, 0, 2 * time.Second}, offsets(t1))

		// The server stops before the event is due and stays down past it: the event
		// fans out at start-up, once.
		in.Data = []byte(`{"n": 4}`)
		t2 := time.Now()
		n.send(t, in)
		stop()
		time.Sleep(10 * time.Second)
		_, stop = bubbleNodeWith(t, dir, ep)
		synctest.Wait()
		require.Equal(t, []time.Duration{10 * time.Second}, offsets(t2)[3:])
		stop()
		n, stop = bubbleNodeWith(t, dir, ep)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, ep.times(), 4, "fanned out once")

		// A restart before the event is due keeps its time.
		t3 := time.Now()
		n.send(t, in)
		time.Sleep(time.Second)
		stop()
		n, stop = bubbleNodeWith(t, dir, ep)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []time.Duration{3 * time.Second}, offsets(t3)[4:])
		next, err := n.svc.FlushDue(context.Background())
		require.NoError(t, err)
		require.True(t, next.IsZero(), "no timer is left")
		stop()
	})
}

// TestDelayedEventValidation: ts and delay are checked, each error names the field, and a
// refused request stores nothing.
func TestDelayedEventValidation(t *testing.T) {
	svc := &Service{cfg: Config{MaxEventsPerRequest: 10, Now: time.Now}}
	cases := map[string]string{
		`{"name": "e", "ts": 1, "delay": "1s"}`:           `event: give "ts" or "delay", not both`,
		`{"name": "e", "delay": "soon"}`:                  `event.delay: want a duration`,
		`{"name": "e", "delay": "0s"}`:                    `event.delay: want a duration above 0`,
		`{"name": "e", "delay": "8761h"}`:                 `event.delay: want a duration above 0 and at most`,
		`{"name": "e", "ts": -5}`:                         `event.ts: want a time in unix milliseconds`,
		`{"name": "e", "ts": 99999999999999}`:             `event.ts: 99999999999999 is more than 365 days ahead`,
		`[{"name": "e"}, {"name": "e", "delay": "1y"}]`:   `events[1].delay`,
		`{"name": "e", "ts": "tomorrow"}`:                 `event.ts: want a int64`,
		`{"name": "e", "delay": 90}`:                      `event.delay: want a string`,
		`{"name": "e", "ts": 1700000000000, "delay": ""}`: `not both`,
	}
	for body, want := range cases {
		_, err := svc.ParseEvents([]byte(body))
		require.ErrorIs(t, err, ErrInvalid, body)
		require.Contains(t, err.Error(), want, body)
	}
	ok, err := svc.ParseEvents([]byte(`{"name": "e", "delay": "90s"}`))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, ok[0].Delay)
	ok, err = svc.ParseEvents([]byte(`{"name": "e", "delay": "8760h"}`))
	require.NoError(t, err)
	require.Equal(t, MaxEventDelay, ok[0].Delay)
}

// TestSweepKeepsPendingDelayedEvents: the retention sweeper removes events older than
// the retention, but not a delayed event still waiting for its time (its id is as old as
// its acceptance); once it has fanned out it ages like the others.
func TestSweepKeepsPendingDelayedEvents(t *testing.T) {
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := openWith(t, t.TempDir(), ep, c, delivery.Config{SweepInterval: time.Millisecond, LogRetention: time.Hour})
	defer n.close(t)
	n.register(t, "app", `{"workflows": [{"name": "wf", "url": "http://x.test/wf", "triggers": [{"event": "e"}]}]}`)
	plain := n.send(t, ev("e", `{}`, ""))
	later := ev("e", `{}`, "")
	later.Delay = 48 * time.Hour
	delayed := n.send(t, later)
	c.Advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		_, err := n.svc.Event(t.Context(), project, plain[0].ID)
		return errors.Is(err, ErrNotFound)
	}, 10*time.Second, time.Millisecond, "the plain event past the retention goes")
	got, err := n.svc.Event(t.Context(), project, delayed[0].ID)
	require.NoError(t, err, "the pending delayed event stays")
	require.True(t, got.Pending)
	c.Advance(47 * time.Hour)
	_, err = n.svc.FlushDue(t.Context())
	require.NoError(t, err)
	got, err = n.svc.Event(t.Context(), project, delayed[0].ID)
	require.NoError(t, err)
	require.False(t, got.Pending)
	require.Len(t, got.Runs, 1)
	c.Advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		_, err := n.svc.Event(t.Context(), project, delayed[0].ID)
		return errors.Is(err, ErrNotFound)
	}, 10*time.Second, time.Millisecond, "fanned out, it ages like the others")
}
