package native

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// timedEndpoint records when each delivery arrives (bubble time) and answers as an SDK
// does without finishing the run.
type timedEndpoint struct {
	mu sync.Mutex
	at []time.Time
}

func (e *timedEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	e.at = append(e.at, time.Now())
	e.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: h, Request: r}, nil
}

func (e *timedEndpoint) times() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.at...)
}

// TestThrottleDelaysStarts: a throttled run is created at once (it has a run id) and its
// first delivery waits for its start: limit at once from idle, then one every
// perMs/limit, per key; the pace survives a restart (no new burst).
func TestThrottleDelaysStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ep := &timedEndpoint{}
		n, stop := bubbleNodeWith(t, dir, ep)
		n.register(t, "app", `{"workflows": [
			{"name": "thr", "url": "http://x.test/thr", "triggers": [{"event": "e"}], "throttle": {"limit": 2, "perMs": 10000, "key": "k"}}]}`)
		t0 := time.Now()
		for range 4 {
			res := n.send(t, ev("e", `{"k": "a"}`, ""))
			require.NotEmpty(t, res[0].Runs[0].RunID, "a throttled run is created")
		}
		n.send(t, ev("e", `{"k": "b"}`, "")) // another key has its own burst
		synctest.Wait()
		offsets := func() []time.Duration {
			var out []time.Duration
			for _, at := range ep.times() {
				out = append(out, at.Sub(t0))
			}
			return out
		}
		require.Equal(t, []time.Duration{0, 0, 0}, offsets())
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []time.Duration{0, 0, 0, 5 * time.Second, 10 * time.Second}, offsets())

		// The key is idle again: a new burst is booked, the server restarts at once, and
		// the next start keeps the pace the booked ones set.
		t1 := time.Now()
		n.send(t, ev("e", `{"k": "a"}`, ""), ev("e", `{"k": "a"}`, ""), ev("e", `{"k": "a"}`, ""))
		stop()
		n, stop = bubbleNodeWith(t, dir, ep)
		n.send(t, ev("e", `{"k": "a"}`, ""))
		time.Sleep(time.Minute)
		synctest.Wait()
		var after []time.Duration
		for _, at := range ep.times()[5:] {
			after = append(after, at.Sub(t1))
		}
		require.Equal(t, []time.Duration{0, 0, 5 * time.Second, 10 * time.Second}, after, "no burst after the restart")
		stop()
	})
}
