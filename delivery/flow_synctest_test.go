package delivery

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// fakeEndpoint is an in-process RoundTripper: inside a synctest bubble real sockets would
// stop the fake clock, so attempts never leave the process. hold, if set, keeps each
// request open until it returns.
type fakeEndpoint struct {
	mu     sync.Mutex
	starts map[string][]time.Time // by path
	open   map[string]int
	most   map[string]int
	hold   func(r *http.Request)
}

func newFakeEndpoint() *fakeEndpoint {
	return &fakeEndpoint{starts: map[string][]time.Time{}, open: map[string]int{}, most: map[string]int{}}
}

func (f *fakeEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.starts[r.URL.Path] = append(f.starts[r.URL.Path], time.Now())
	f.open[r.URL.Path]++
	f.most[r.URL.Path] = max(f.most[r.URL.Path], f.open[r.URL.Path])
	f.mu.Unlock()
	if f.hold != nil {
		f.hold(r)
	}
	f.mu.Lock()
	f.open[r.URL.Path]--
	f.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

func (f *fakeEndpoint) startsOf(path string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.starts[path]...)
}

// bubbleEngine starts an engine on a real bbolt file whose attempts go to ep.
func bubbleEngine(t *testing.T, ep http.RoundTripper, cfg Config) (*Engine, *storage.Store) {
	store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	_, err = EnsureProject(t.Context(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "h")
	require.NoError(t, err)
	cfg.Transport = ep
	return startEngine(t, store, cfg), store
}

func keyed(key string, parallelism, rate int, period time.Duration) *flowctl.Config {
	return &flowctl.Config{Key: key, Parallelism: parallelism, Rate: rate, Period: period}
}

func TestRateLimitTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		start := time.Now()
		for i := 0; i < 7; i++ {
			_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/r", Method: "POST", FlowControl: keyed("k", 0, 3, 2*time.Second)}})
			require.NoError(t, err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		starts := ep.startsOf("/r")
		require.Len(t, starts, 7)
		// rate 3 per 2 s: 3 at 0 s, 3 at 2 s, the 7th at 4 s.
		for i, s := range starts {
			require.Equal(t, time.Duration(i/3)*2*time.Second, s.Sub(start).Truncate(time.Millisecond), "start %d", i)
		}
	})
}

func TestParallelismHoldsOnlyWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		ep.hold = func(r *http.Request) { time.Sleep(time.Second) } // each attempt takes 1 s
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		start := time.Now()
		for i := 0; i < 4; i++ {
			_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/p", Method: "POST", FlowControl: keyed("one", 1, 0, 0)}})
			require.NoError(t, err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		starts := ep.startsOf("/p")
		require.Len(t, starts, 4)
		for i, s := range starts {
			require.Equal(t, time.Duration(i)*time.Second, s.Sub(start).Truncate(time.Millisecond), "start %d: one at a time, the next right after a release", i)
		}
		require.Equal(t, 1, ep.most["/p"])
	})
}

func TestProjectCeilingAcrossKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		ep.hold = func(r *http.Request) { time.Sleep(time.Second) }
		e, store := bubbleEngine(t, ep, Config{ProjectCeiling: 2})
		defer store.Close()
		defer e.Stop()
		for i := 0; i < 6; i++ {
			key := []string{"a", "b", "c"}[i%3]
			_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/" + key, Method: "POST", FlowControl: keyed(key, 5, 0, 0)}})
			require.NoError(t, err)
		}
		_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/nokey", Method: "POST"}})
		require.NoError(t, err)
		time.Sleep(time.Second / 2)
		synctest.Wait()
		max, count := e.GlobalParallelism(testProject)
		require.Equal(t, 2, max)
		require.Equal(t, 2, count, "the ceiling holds across keys and unkeyed deliveries")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		total := 0
		for _, p := range []string{"/a", "/b", "/c", "/nokey"} {
			total += len(ep.startsOf(p))
		}
		require.Equal(t, 7, total, "everything is eventually admitted")
	})
}

func TestPausedKeyKeepsWaitlisting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		require.NoError(t, e.SetFlowKeyPaused(t.Context(), testProject, "k", true))
		res, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/k", Method: "POST", FlowControl: keyed("k", 3, 0, 0)}})
		require.NoError(t, err)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Empty(t, ep.startsOf("/k"))
		info := e.FlowKey(testProject, "k")
		require.True(t, info.Paused)
		require.Equal(t, 1, info.WaitListSize)
		reason, _, ok, err := e.WaitReason(t.Context(), testProject, res[0].MessageID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Contains(t, reason, "paused(key=k)")

		require.NoError(t, e.SetFlowKeyPaused(t.Context(), testProject, "k", false))
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, ep.startsOf("/k"), 1)
	})
}

func TestSleepingRunHoldsNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		trigger := func(run, path string) {
			_, err := e.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: "http://x.test/" + path, Method: "POST",
				RunID: run, FlowControl: keyed("shared", 1, 0, 0)}, Init: &RunInit{}}})
			require.NoError(t, err)
		}
		trigger("wfr_sleeper", "sleeper")
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, ep.startsOf("/sleeper"), 1)

		// The sleeper's next step is due in an hour: while it sleeps it holds nothing.
		_, err := e.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: "http://x.test/sleeper", Method: "POST",
			RunID: "wfr_sleeper", CallType: CallStep, Body: []byte(`{"stepId":1,"stepType":"SleepFor","sleepFor":3600}`),
			NotBefore: time.Now().Add(time.Hour).UnixMilli()}}})
		require.NoError(t, err)
		start := time.Now()
		trigger("wfr_other", "other")
		time.Sleep(time.Second)
		synctest.Wait()
		others := ep.startsOf("/other")
		require.Len(t, others, 1, "another run of the same key starts while the first sleeps")
		require.Less(t, others[0].Sub(start), time.Second)
		require.Equal(t, 0, e.FlowKey(testProject, "shared").ParallelismCount)

		time.Sleep(time.Hour)
		synctest.Wait()
		require.Len(t, ep.startsOf("/sleeper"), 2, "the sleeper resumes when its step is due")
	})
}

func TestStepOverrideGatesUnderItsOwnKeyOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		release := make(chan struct{})
		var seen sync.Map // path → the flow-control key the delivery carried
		ep.hold = func(r *http.Request) {
			seen.Store(r.URL.Path, r.Header.Get("Upstash-Flow-Control-Key")+" "+r.Header.Get("Upstash-Flow-Control-Value"))
			if r.URL.Path == "/step" {
				<-release
			}
		}
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		_, err := e.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: "http://x.test/init", Method: "POST",
			RunID: "wfr_o", FlowControl: keyed("runkey", 1, 0, 0)}, Init: &RunInit{}}})
		require.NoError(t, err)
		time.Sleep(time.Second)
		synctest.Wait()

		// A plan step with its own flow control (docs/protocol.md, "Per-step flow control").
		_, err = e.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: "http://x.test/step", Method: "POST",
			RunID: "wfr_o", CallType: CallStep, Body: []byte(`{"stepId":0,"stepType":"Run","concurrent":1,"targetStep":1}`),
			FlowControl: keyed("stepkey", 1, 5, time.Second)}}})
		require.NoError(t, err)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, e.FlowKey(testProject, "stepkey").ParallelismCount, "the step holds its own key")
		require.Equal(t, 0, e.FlowKey(testProject, "runkey").ParallelismCount, "the run's key is not held by the step")
		got, _ := seen.Load("/step")
		require.Equal(t, "stepkey parallelism=1, rate=5, period=1s", got, "the delivery carries the config it was admitted under")
		got, _ = seen.Load("/init")
		require.Equal(t, "runkey parallelism=1", got)
		close(release)
		synctest.Wait()
	})
}

func TestCeilingTakesTurnsAcrossKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		ep.hold = func(*http.Request) { time.Sleep(time.Second) }
		e, store := bubbleEngine(t, ep, Config{ProjectCeiling: 1})
		defer store.Close()
		defer e.Stop()
		var order []string
		var mu sync.Mutex
		hold := ep.hold
		ep.hold = func(r *http.Request) {
			mu.Lock()
			order = append(order, r.URL.Path)
			mu.Unlock()
			hold(r)
		}
		for _, key := range []string{"a", "a", "a", "b", "b"} {
			_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/" + key, Method: "POST", FlowControl: keyed(key, 5, 0, 0)}})
			require.NoError(t, err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// a1 starts at once; a then b joined the ring in that order, and from then on the
		// keys alternate instead of a keeping the slot until it is empty.
		require.Equal(t, []string{"/a", "/a", "/b", "/a", "/b"}, order, "a busy key does not keep the shared slot: keys take turns")
	})
}

func TestCancelledWaitingMessageTakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		publish := func() string {
			res, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/r", Method: "POST", FlowControl: keyed("r", 0, 1, time.Minute)}})
			require.NoError(t, err)
			return res[0].MessageID
		}
		publish()
		waiting := publish()
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, e.FlowKey(testProject, "r").WaitListSize)
		n, err := e.Cancel(t.Context(), testProject, []string{waiting}, nil, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 0, e.FlowKey(testProject, "r").WaitListSize, "a cancelled message leaves the waitlist at once")

		require.NoError(t, e.ResetFlowKeyRate(t.Context(), testProject, "r"))
		publish()
		time.Sleep(time.Second)
		synctest.Wait()
		require.Len(t, ep.startsOf("/r"), 2, "after resetRate the next message starts; the cancelled one used nothing")
	})
}

func TestStopStartsNoWaitingDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		ep.hold = func(*http.Request) { time.Sleep(time.Second) }
		e, store := bubbleEngine(t, ep, Config{DrainTimeout: time.Minute})
		defer store.Close()
		for i := 0; i < 3; i++ {
			_, err := e.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://x.test/s", Method: "POST", FlowControl: keyed("s", 1, 0, 0)}})
			require.NoError(t, err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		e.Stop() // drains the one in flight; the two waiting stay for the next start
		require.Len(t, ep.startsOf("/s"), 1)
	})
}
