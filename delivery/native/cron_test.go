package native

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// cronFires are the cron data of the runs started so far.
func cronFires(t *testing.T, ep *endpoint) []cronData {
	t.Helper()
	var out []cronData
	for _, p := range firstPayloads(t, ep)["tick"] {
		require.Equal(t, storage.CronEventName, p.Name)
		var d cronData
		require.NoError(t, json.Unmarshal(p.Data, &d))
		require.Equal(t, p.Ts, d.ScheduledAt, "the event's ts is its instant")
		out = append(out, d)
	}
	return out
}

// TestCronFiresOncePerInstant: a "* * * * *" trigger starts one run a minute, on the
// minute, through the workflow's gates; registering the app again moves nothing; after a
// restart that skipped minutes, only the most recent missed minute fires, once, late.
func TestCronFiresOncePerInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ep := &endpoint{}
		n, stop := bubbleNode(t, dir, ep)
		start := time.Now().Truncate(time.Minute)
		minute := func(m int) int64 { return start.Add(time.Duration(m) * time.Minute).UnixMilli() }
		app := `{"workflows": [{"name": "tick", "url": "http://x.test/tick", "triggers": [{"cron": "* * * * *"}, {"event": "manual"}],
			"idempotency": {"key": "scheduledAt"}}]}`
		n.register(t, "app", app)
		time.Sleep(time.Until(start.Add(time.Minute)) - time.Millisecond)
		synctest.Wait()
		require.Empty(t, cronFires(t, ep), "nothing before the first minute")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, []cronData{{Cron: "* * * * *", ScheduledAt: minute(1)}}, cronFires(t, ep))

		n.register(t, "app", app) // the same trigger again: the pending fire stays
		time.Sleep(90 * time.Second)
		synctest.Wait()
		require.Equal(t, []cronData{{Cron: "* * * * *", ScheduledAt: minute(1)}, {Cron: "* * * * *", ScheduledAt: minute(2)}}, cronFires(t, ep),
			"once a minute, once")

		// Down from 2:30 to 5:30: minutes 3, 4 and 5 are missed; only 5 fires, late.
		stop()
		time.Sleep(3 * time.Minute)
		_, stop = bubbleNode(t, dir, ep)
		synctest.Wait()
		got := cronFires(t, ep)
		require.Len(t, got, 3)
		require.Equal(t, cronData{Cron: "* * * * *", ScheduledAt: minute(5), Late: true}, got[2])
		stop()
		n, stop = bubbleNode(t, dir, ep) // a restart fires nothing more
		synctest.Wait()
		require.Len(t, cronFires(t, ep), 3)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		got = cronFires(t, ep)
		require.Len(t, got, 4)
		require.Equal(t, cronData{Cron: "* * * * *", ScheduledAt: minute(6)}, got[3], "then on time again")

		// A fire is an event, listed with its run.
		evs, _, err := n.svc.Events(context.Background(), project, storage.CronEventName, "", 10)
		require.NoError(t, err)
		require.Len(t, evs, 4)
		require.Len(t, evs[0].Runs, 1)
		require.NotEmpty(t, evs[0].Runs[0].RunID)

		// Removing the trigger removes its timer.
		n.register(t, "app", `{"workflows": [{"name": "tick", "url": "http://x.test/tick", "triggers": [{"event": "manual"}]}]}`)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		require.Len(t, cronFires(t, ep), 4)
		next, err := n.svc.FlushDue(context.Background())
		require.NoError(t, err)
		require.True(t, next.IsZero(), "no timer is left")
		stop()
	})
}

// TestCronZoneAndGates: tz places the instant in its zone, and a fire passes the
// workflow's gates (a singleton "skip" skips the fire while the last run is live).
func TestCronZoneAndGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &endpoint{}
		n, stop := bubbleNode(t, t.TempDir(), ep)
		defer stop()
		n.register(t, "app", `{"workflows": [{"name": "tick", "url": "http://x.test/tick",
			"triggers": [{"cron": "30 9 * * *", "tz": "Asia/Kolkata"}], "singleton": {"mode": "skip"}}]}`)
		time.Sleep(3 * 24 * time.Hour)
		synctest.Wait()
		got := cronFires(t, ep)
		require.Len(t, got, 1, "the first run never ends: the later fires are skipped")
		at := time.UnixMilli(got[0].ScheduledAt).UTC()
		require.Equal(t, 4, at.Hour(), "09:30 in Kolkata is 04:00 UTC")
		require.Equal(t, 0, at.Minute())
		evs, _, err := n.svc.Events(context.Background(), project, storage.CronEventName, "", 10)
		require.NoError(t, err)
		require.Len(t, evs, 3)
		require.True(t, evs[0].Runs[0].Skipped)
	})
}

// TestCronTriggerValidation: a cron trigger that cannot fire is a 400 naming the field.
func TestCronTriggerValidation(t *testing.T) {
	cases := map[string]string{
		`{"cron": "0 0 30 2 *"}`:                       `triggers[0].cron": "0 0 30 2 *" names a date that never occurs`,
		`{"cron": "61 * * * *"}`:                       `triggers[0].cron": "61 * * * *"`,
		`{"cron": "* * * *"}`:                          `triggers[0].cron"`,
		`{"cron": "@hourly"}`:                          `want five fields`,
		`{"cron": "CRON_TZ=UTC * * * * *"}`:            `the zone goes in "tz"`,
		`{"cron": "* * * * *", "tz": "Mars/Base"}`:     `triggers[0].tz": "Mars/Base" is not an IANA time zone`,
		`{"cron": "* * * * *", "event": "e"}`:          `give "event" or "cron", not both`,
		`{"event": "e", "tz": "UTC"}`:                  `triggers[0].tz": only a cron trigger has a zone`,
		`{"cron": "* * * * *", "every": 1}`:            `triggers[0].every": unknown field`,
		`{"cron": ""}`:                                 `triggers[0].event"`,
		`{"cron": "` + strings.Repeat("1", 300) + `"}`: `triggers[0].cron": want a five-field expression`,
	}
	for trig, want := range cases {
		_, err := newParser(t).ParseApp("app", []byte(`{"workflows": [{"name": "w", "url": "http://x.test/w", "triggers": [`+trig+`]}]}`))
		require.ErrorIs(t, err, ErrInvalid, trig)
		require.Contains(t, err.Error(), want, trig)
	}
	_, err := newParser(t).ParseApp("app", []byte(`{"workflows": [{"name": "w", "url": "http://x.test/w", "triggers": [{"cron": "0 * * * *"}, {"cron": "0 * * * *"}]}]}`))
	require.ErrorContains(t, err, `triggers[1].cron": cron "0 * * * *" is listed twice`)
	defs, err := newParser(t).ParseApp("app", []byte(`{"workflows": [{"name": "w", "url": "http://x.test/w", "triggers": [{"cron": "0 0 29 2 *", "tz": "Europe/Berlin"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, []Trigger{{Cron: "0 0 29 2 *", TZ: "Europe/Berlin"}}, defs[0].Triggers)
}

// newParser is a Service that only parses definitions.
func newParser(t *testing.T) *Service {
	t.Helper()
	return &Service{cfg: Config{CheckURL: func(raw string) (*url.URL, error) { return url.Parse(raw) }}.withDefaults()}
}
