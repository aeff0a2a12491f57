package server

// API tests of flow control: deliveries of a key wait in its waitlist while its limits
// are reached, and the management routes (/v2/flowControl, /v2/globalParallelism) show
// and change the key's state. Deliveries are held in flight by a holding endpoint, so
// slots stay taken for as long as a test needs.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// holdingEndpoint is a destination on 127.0.0.1 that keeps every request open until the
// test releases it (by message id), so a delivery holds its flow-control slot meanwhile.
type holdingEndpoint struct {
	srv     *httptest.Server
	mu      sync.Mutex
	arrived []string         // Upstash-Message-Id of every request, in arrival order
	holds   map[string]*hold // by message id
	open    bool             // set by releaseAll: later requests are answered at once
	changed chan struct{}    // closed and replaced on every arrival
}

type hold struct {
	release  chan struct{}
	released bool
}

// newHoldingEndpoint starts the endpoint. Call it before newAPI and register releaseAll
// after it (newFlowEnv does both): cleanups run in reverse, so held requests are let go
// before the engine drains its attempts, and the endpoint closes after the engine stopped.
func newHoldingEndpoint(t *testing.T) *holdingEndpoint {
	t.Helper()
	h := &holdingEndpoint{holds: map[string]*hold{}, changed: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *holdingEndpoint) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	id := req.Header.Get("Upstash-Message-Id")
	h.mu.Lock()
	h.arrived = append(h.arrived, id)
	hd := h.holds[id]
	if hd == nil {
		hd = &hold{release: make(chan struct{})}
		h.holds[id] = hd
		if h.open {
			hd.released = true
			close(hd.release)
		}
	}
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	select {
	case <-hd.release:
	case <-req.Context().Done():
	}
	_, _ = io.WriteString(w, "ok")
}

// URL is the endpoint's URL for path.
func (h *holdingEndpoint) URL(path string) string { return h.srv.URL + path }

// arrivals returns the message ids received so far, in arrival order.
func (h *holdingEndpoint) arrivals() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.arrived...)
}

// waitArrivals waits until n requests arrived and returns their message ids.
func (h *holdingEndpoint) waitArrivals(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		got, changed := append([]string(nil), h.arrived...), h.changed
		h.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("timed out after %s: %d of %d expected requests arrived", waitTimeout, len(got), n)
		}
	}
}

// release answers the held request of message id.
func (h *holdingEndpoint) release(t *testing.T, id string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	hd := h.holds[id]
	require.NotNil(t, hd, "no request of %s arrived", id)
	require.False(t, hd.released, "%s already released", id)
	hd.released = true
	close(hd.release)
}

// releaseAll answers every held request and every later one at once.
func (h *holdingEndpoint) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open = true
	for _, hd := range h.holds {
		if !hd.released {
			hd.released = true
			close(hd.release)
		}
	}
}

// newFlowEnv starts a server and a holding endpoint, cleaned up in a safe order.
func newFlowEnv(t *testing.T, opts envOptions) (*apiEnv, *holdingEndpoint) {
	t.Helper()
	ep := newHoldingEndpoint(t)
	env := newAPI(t, opts)
	t.Cleanup(ep.releaseAll)
	return env, ep
}

// publishFlow publishes an empty message to dest under flow-control key and value.
func (e *apiEnv) publishFlow(t *testing.T, dest, key, value string) string {
	t.Helper()
	return e.publish(t, dest, nil, "Upstash-Flow-Control-Key", key, "Upstash-Flow-Control-Value", value)
}

// flowKey reads a key's state.
func (e *apiEnv) flowKey(t *testing.T, key string) wire.FlowControlInfo {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/flowControl/"+url.PathEscape(key), nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[wire.FlowControlInfo](t, r)
}

// eventuallyFlow waits until key's state satisfies cond and returns it.
func (e *apiEnv) eventuallyFlow(t *testing.T, key, what string, cond func(wire.FlowControlInfo) bool) wire.FlowControlInfo {
	t.Helper()
	var info wire.FlowControlInfo
	eventually(t, key+": "+what, func() bool {
		info = e.flowKey(t, key)
		return cond(info)
	})
	return info
}

// flowAction posts a management action (pause, resume, pin, unpin, resetRate) on key;
// query is the query string without "?".
func (e *apiEnv) flowAction(t *testing.T, key, action, query string) {
	t.Helper()
	path := "/v2/flowControl/" + url.PathEscape(key) + "/" + action
	if query != "" {
		path += "?" + query
	}
	r := e.call(t, http.MethodPost, path, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
	require.Empty(t, r.Body, path)
}

// flowList lists the keys matching search.
func (e *apiEnv) flowList(t *testing.T, search string) []wire.FlowControlInfo {
	t.Helper()
	path := "/v2/flowControl"
	if search != "" {
		path += "?search=" + url.QueryEscape(search)
	}
	r := e.call(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.True(t, strings.HasPrefix(string(r.Body), "["), "a JSON array, even when empty: %s", r.Body)
	return decodeJSON[[]wire.FlowControlInfo](t, r)
}

func flowKeys(infos []wire.FlowControlInfo) []string {
	keys := make([]string, len(infos))
	for i, info := range infos {
		keys[i] = info.Key
	}
	return keys
}

// globalParallelism reads the project's global parallelism.
func (e *apiEnv) globalParallelism(t *testing.T) wire.GlobalParallelism {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/globalParallelism", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[wire.GlobalParallelism](t, r)
}

// waiting returns the waiting field of message id (nil when it does not wait).
func (e *apiEnv) waiting(t *testing.T, id string) *wire.Waiting {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/messages/"+id, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[wire.Message](t, r).Waiting
}

// requireWaiting checks that message id waits for a reason that contains part, since a
// time within [from, now].
func (e *apiEnv) requireWaiting(t *testing.T, id, part string, from int64) {
	t.Helper()
	w := e.waiting(t, id)
	require.NotNil(t, w, "%s must be waiting", id)
	require.Contains(t, w.Reason, part, id)
	require.GreaterOrEqual(t, w.Since, from, id)
	require.LessOrEqual(t, w.Since, time.Now().UnixMilli(), id)
}

func TestFlowControlParallelismPauseResume(t *testing.T) {
	t.Parallel()
	env, ep := newFlowEnv(t, envOptions{})
	dest := ep.URL("/slow")
	from := time.Now().UnixMilli()

	ids := make([]string, 3)
	for i := range ids {
		ids[i] = env.publishFlow(t, dest, "k", "parallelism=1")
	}
	require.Equal(t, ids[:1], ep.waitArrivals(t, 1), "the oldest message starts first")
	info := env.eventuallyFlow(t, "k", "one in flight, two waiting", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 2
	})
	require.Equal(t, wire.FlowControlInfo{Key: "k", WaitListSize: 2, ParallelismMax: 1, ParallelismCount: 1, RatePeriod: 1}, info)
	require.Equal(t, []wire.FlowControlInfo{info}, env.flowList(t, ""))
	require.Equal(t, wire.GlobalParallelism{Max: 0, Count: 1}, env.globalParallelism(t))

	// The waiting messages say why; the one in flight does not wait.
	require.Nil(t, env.waiting(t, ids[0]))
	for _, id := range ids[1:] {
		env.requireWaiting(t, id, "parallelism(key=k)", from)
	}

	// Paused: the delivery in flight finishes, nothing else starts, new messages wait.
	env.flowAction(t, "k", "pause", "")
	require.True(t, env.flowKey(t, "k").IsPaused)
	env.requireWaiting(t, ids[1], "paused(key=k)", from)
	ep.release(t, ids[0])
	// Once the slot is back and both still wait, the release started nothing (a start
	// takes the slot and leaves the waitlist in one step).
	env.eventuallyFlow(t, "k", "slot released while paused", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 0 && i.WaitListSize == 2
	})
	ids = append(ids, env.publishFlow(t, dest, "k", "parallelism=1"))
	info = env.eventuallyFlow(t, "k", "the new message waits", func(i wire.FlowControlInfo) bool { return i.WaitListSize == 3 })
	require.True(t, info.IsPaused)
	require.Zero(t, info.ParallelismCount)
	require.Len(t, ep.arrivals(), 1, "a paused key starts nothing")
	env.requireWaiting(t, ids[3], "paused(key=k)", from)
	require.Equal(t, wire.GlobalParallelism{Max: 0, Count: 0}, env.globalParallelism(t))

	// Resumed: the next oldest starts, one at a time again.
	env.flowAction(t, "k", "resume", "")
	require.Equal(t, ids[:2], ep.waitArrivals(t, 2))
	info = env.eventuallyFlow(t, "k", "one in flight after resume", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 2
	})
	require.False(t, info.IsPaused)
	require.Nil(t, env.waiting(t, ids[1]))
	env.requireWaiting(t, ids[2], "parallelism(key=k)", from)

	// The rest go out in order, one after the other.
	ep.release(t, ids[1])
	require.Equal(t, ids[:3], ep.waitArrivals(t, 3))
	ep.release(t, ids[2])
	require.Equal(t, ids, ep.waitArrivals(t, 4))
	ep.release(t, ids[3])
	env.eventuallyFlow(t, "k", "drained", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 0 && i.WaitListSize == 0
	})
	for _, id := range ids {
		eventually(t, id+" DELIVERED", func() bool {
			return len(env.logs(t, "messageIds="+id+"&state=DELIVERED").Events) == 1
		})
	}
	require.Len(t, ep.arrivals(), 4, "each message delivered once")
	require.Empty(t, env.flowList(t, ""), "an idle key is not listed")
}

func TestFlowControlPin(t *testing.T) {
	t.Parallel()
	env, ep := newFlowEnv(t, envOptions{})
	dest := ep.URL("/pin")

	ids := make([]string, 4)
	for i := range ids {
		ids[i] = env.publishFlow(t, dest, "p", "parallelism=1")
	}
	ep.waitArrivals(t, 1)
	env.eventuallyFlow(t, "p", "one in flight", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 3
	})

	// Pinned to 2: a second delivery starts at once, whatever the messages ask.
	env.flowAction(t, "p", "pin", "parallelism=2")
	require.Equal(t, ids[:2], ep.waitArrivals(t, 2))
	info := env.eventuallyFlow(t, "p", "two in flight", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 2 && i.WaitListSize == 2
	})
	require.Equal(t, wire.FlowControlInfo{Key: "p", WaitListSize: 2, ParallelismMax: 2, ParallelismCount: 2, RatePeriod: 1, IsPinnedParallelism: true}, info)
	env.requireWaiting(t, ids[2], "parallelism(key=p) <= 2", 0)
	require.Equal(t, 2, env.globalParallelism(t).Count)

	// Unpinned: back to what the messages ask (1). Both deliveries in flight finish; the
	// first release starts nothing (one is still in flight), the second starts the next.
	env.flowAction(t, "p", "unpin", "parallelism=true&rate=false")
	info = env.flowKey(t, "p")
	require.False(t, info.IsPinnedParallelism)
	require.Equal(t, 1, info.ParallelismMax)
	require.Equal(t, 2, info.ParallelismCount)
	ep.release(t, ids[0])
	env.eventuallyFlow(t, "p", "one slot released", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 2
	})
	require.Len(t, ep.arrivals(), 2)
	ep.release(t, ids[1])
	require.Equal(t, ids[:3], ep.waitArrivals(t, 3))
	env.eventuallyFlow(t, "p", "the next one started", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 1
	})

	// Unpinning what is not pinned changes nothing.
	env.flowAction(t, "p", "unpin", "")
	env.flowAction(t, "p", "unpin", "rate=true")
	require.Equal(t, 1, env.flowKey(t, "p").ParallelismMax)
}

func TestFlowControlRate(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/rate")
	from := time.Now().UnixMilli()

	ids := make([]string, 3)
	for i := range ids {
		ids[i] = env.publishFlow(t, dest, "r", "rate=2,period=60")
	}
	isOurs := func(q recorded) bool {
		id := q.Header.Get("Upstash-Message-Id")
		return id == ids[0] || id == ids[1] || id == ids[2]
	}
	// The first two start together (their arrival order is up to the network).
	got := env.Endpoint.waitN(t, 2, isOurs)
	require.ElementsMatch(t, ids[:2], []string{got[0].Header.Get("Upstash-Message-Id"), got[1].Header.Get("Upstash-Message-Id")})
	info := env.eventuallyFlow(t, "r", "two started, one waiting", func(i wire.FlowControlInfo) bool {
		return i.RateCount == 2 && i.WaitListSize == 1 && i.ParallelismCount == 0
	})
	require.Equal(t, 2, info.RateMax)
	require.EqualValues(t, 60, info.RatePeriod)
	require.Zero(t, info.ParallelismMax)
	require.False(t, info.IsPinnedRate)
	require.GreaterOrEqual(t, info.RatePeriodStart, from)
	require.LessOrEqual(t, info.RatePeriodStart, time.Now().UnixMilli())
	env.requireWaiting(t, ids[2], "rate(key=r)", from)
	require.Equal(t, 0, env.Endpoint.deliveriesOf(ids[2]))

	// resetRate forgets the starts: the waiting one starts at once.
	env.flowAction(t, "r", "resetRate", "")
	env.Endpoint.waitMessage(t, ids[2])
	info = env.eventuallyFlow(t, "r", "the third started", func(i wire.FlowControlInfo) bool {
		return i.WaitListSize == 0 && i.ParallelismCount == 0
	})
	require.Equal(t, 1, info.RateCount, "only the start after the reset counts")
	env.flowAction(t, "r", "resetRate", "")
	info = env.flowKey(t, "r")
	require.Zero(t, info.RateCount)
	require.Zero(t, info.RatePeriodStart, "an empty window has no start")

	// A pinned rate wins over what the messages ask.
	env.flowAction(t, "r", "pin", "rate=1&period=30")
	info = env.flowKey(t, "r")
	require.True(t, info.IsPinnedRate)
	require.False(t, info.IsPinnedParallelism)
	require.Equal(t, 1, info.RateMax)
	require.EqualValues(t, 30, info.RatePeriod)
	a := env.publishFlow(t, dest, "r", "rate=2,period=60")
	b := env.publishFlow(t, dest, "r", "rate=2,period=60")
	env.Endpoint.waitMessage(t, a)
	env.eventuallyFlow(t, "r", "pinned rate reached", func(i wire.FlowControlInfo) bool {
		return i.RateCount == 1 && i.WaitListSize == 1
	})
	env.requireWaiting(t, b, "rate(key=r) <= 1 per 30s", from)

	// Unpinned: the messages' own rate (2 per 60s) has room for b.
	env.flowAction(t, "r", "unpin", "rate=true")
	env.Endpoint.waitMessage(t, b)
	info = env.eventuallyFlow(t, "r", "b started", func(i wire.FlowControlInfo) bool {
		return i.WaitListSize == 0 && i.RateCount == 2
	})
	require.False(t, info.IsPinnedRate)
}

func TestFlowControlListAndProjects(t *testing.T) {
	t.Parallel()
	env, ep := newFlowEnv(t, envOptions{})
	other := env.withProject(t, "other", "other-token")

	require.Empty(t, env.flowList(t, ""))
	require.Equal(t, wire.GlobalParallelism{}, env.globalParallelism(t))

	// Configured keys are listed even without deliveries, sorted by key.
	for _, k := range []string{"beta", "alpha-2", "alpha-1"} {
		env.flowAction(t, k, "pause", "")
	}
	require.Equal(t, []string{"alpha-1", "alpha-2", "beta"}, flowKeys(env.flowList(t, "")))
	require.Equal(t, []string{"alpha-1", "alpha-2"}, flowKeys(env.flowList(t, "alpha")))
	require.Equal(t, []string{"beta"}, flowKeys(env.flowList(t, "et")))
	require.Empty(t, env.flowList(t, "gamma"))
	for _, info := range env.flowList(t, "") {
		require.Equal(t, wire.FlowControlInfo{Key: info.Key, RatePeriod: 1, IsPaused: true}, info)
	}

	// Another project's key of the same name is another key: not paused, not listed here.
	require.Empty(t, other.flowList(t, ""))
	require.False(t, other.flowKey(t, "alpha-1").IsPaused)
	m1 := other.publishFlow(t, ep.URL("/other"), "alpha-1", "parallelism=1")
	m2 := other.publishFlow(t, ep.URL("/other"), "alpha-1", "parallelism=1")
	require.Equal(t, []string{m1}, ep.waitArrivals(t, 1))
	info := other.eventuallyFlow(t, "alpha-1", "one in flight", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 1 && i.WaitListSize == 1
	})
	require.False(t, info.IsPaused)
	require.Equal(t, []string{"alpha-1"}, flowKeys(other.flowList(t, "")))
	require.Equal(t, wire.GlobalParallelism{Count: 1}, other.globalParallelism(t))
	require.Equal(t, wire.GlobalParallelism{}, env.globalParallelism(t))
	mine := env.flowKey(t, "alpha-1")
	require.Equal(t, wire.FlowControlInfo{Key: "alpha-1", RatePeriod: 1, IsPaused: true}, mine)

	// Changing one project's key does not touch the other's.
	other.flowAction(t, "beta", "pin", "parallelism=3")
	require.False(t, env.flowKey(t, "beta").IsPinnedParallelism)
	env.flowAction(t, "alpha-1", "resume", "")
	require.Equal(t, []string{"alpha-2", "beta"}, flowKeys(env.flowList(t, "")), "a resumed idle key is forgotten")
	other.flowAction(t, "alpha-1", "pause", "")
	ep.release(t, m1)
	other.eventuallyFlow(t, "alpha-1", "slot released while paused", func(i wire.FlowControlInfo) bool {
		return i.ParallelismCount == 0 && i.WaitListSize == 1
	})
	other.requireWaiting(t, m2, "paused(key=alpha-1)", 0)
	require.Len(t, ep.arrivals(), 1)
	other.flowAction(t, "alpha-1", "resume", "")
	require.Equal(t, []string{m1, m2}, ep.waitArrivals(t, 2))
}

func TestFlowControlBadInput(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	for _, key := range []string{"a%20b", "a%2Fb", "%C3%A9", strings.Repeat("x", 257)} {
		for _, c := range []struct{ method, suffix string }{
			{http.MethodGet, ""},
			{http.MethodPost, "/pause"},
			{http.MethodPost, "/resume"},
			{http.MethodPost, "/pin?parallelism=1"},
			{http.MethodPost, "/unpin?parallelism=true"},
			{http.MethodPost, "/resetRate"},
		} {
			path := "/v2/flowControl/" + key + c.suffix
			r := env.call(t, c.method, path, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %s", c.method, path, r.Body)
			require.Contains(t, r.errorMessage(t), "flow-control key", path)
		}
	}
	require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/flowControl/"+strings.Repeat("x", 256), nil).Status)

	for query, errPart := range map[string]string{
		"":                             "parallelism or rate",
		"period=60":                    "parallelism or rate",
		"parallelism=0":                "parallelism or rate",
		"parallelism=0&rate=0":         "parallelism or rate",
		"parallelism=-1":               "parallelism",
		"parallelism=two":              "parallelism",
		"parallelism=1000001":          "parallelism",
		"rate=1.5":                     "rate",
		"rate=1000001":                 "rate",
		"rate=1&period=-1":             "period",
		"rate=1&period=1m":             "period",
		"rate=1&period=604801":         "period",
		"parallelism=1&rate=x":         "rate",
		"parallelism=1&period=forever": "period",
	} {
		r := env.call(t, http.MethodPost, "/v2/flowControl/k/pin?"+query, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "pin?%s: %s", query, r.Body)
		require.Contains(t, r.errorMessage(t), errPart, "pin?%s", query)
	}
	for _, query := range []string{"parallelism=yes", "rate=1", "parallelism=true&rate=TRUE"} {
		r := env.call(t, http.MethodPost, "/v2/flowControl/k/unpin?"+query, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "unpin?%s: %s", query, r.Body)
	}

	// Nothing was changed.
	require.Empty(t, env.flowList(t, ""))
	require.Equal(t, wire.FlowControlInfo{Key: "k", RatePeriod: 1}, env.flowKey(t, "k"))

	// The extremes are accepted.
	env.flowAction(t, "k", "pin", "parallelism=1000000&rate=1000000&period=604800")
	info := env.flowKey(t, "k")
	require.Equal(t, wire.FlowControlInfo{Key: "k", ParallelismMax: 1000000, RateMax: 1000000, RatePeriod: 604800, IsPinnedParallelism: true, IsPinnedRate: true}, info)
	env.flowAction(t, "k", "unpin", "parallelism=true&rate=true")
	require.Empty(t, env.flowList(t, ""), "a key without pins is forgotten")
}

func TestFlowControlWorkflowRunWaits(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	const runID = "wfr_flow"
	wfURL := ep.URL("/wf/flow")

	env.flowAction(t, "wf-key", "pause", "")
	m0 := env.trigger(t, runID, wfURL, `{"a":1}`,
		"upstash-flow-control-key", "wf-key",
		"upstash-flow-control-value", "parallelism=1")
	env.eventuallyFlow(t, "wf-key", "the trigger waits", func(i wire.FlowControlInfo) bool { return i.WaitListSize == 1 })
	run := env.runLog(t, runID)
	require.NotNil(t, run.Waiting, "a live run whose delivery waits says why")
	require.Contains(t, run.Waiting.Reason, "paused(key=wf-key)")
	require.Positive(t, run.Waiting.Since)
	env.requireWaiting(t, m0, "paused(key=wf-key)", 0)

	env.flowAction(t, "wf-key", "resume", "")
	ep.waitMessage(t, m0)
	eventually(t, "the run no longer waits", func() bool { return env.runLog(t, runID).Waiting == nil })
}

func TestFlowControlProjectCeiling(t *testing.T) {
	t.Parallel()
	env, ep := newFlowEnv(t, envOptions{engine: func(c *delivery.Config) { c.ProjectCeiling = 1 }})
	other := env.withProject(t, "other", "other-token")
	dest := ep.URL("/ceiling")
	from := time.Now().UnixMilli()

	// A message without a key counts against the ceiling too.
	plain := env.publish(t, dest, nil)
	require.Equal(t, []string{plain}, ep.waitArrivals(t, 1))
	keyed := env.publishFlow(t, dest, "x", "parallelism=5")
	info := env.eventuallyFlow(t, "x", "waits for the ceiling", func(i wire.FlowControlInfo) bool { return i.WaitListSize == 1 })
	require.Zero(t, info.ParallelismCount)
	require.Equal(t, 5, info.ParallelismMax)
	env.requireWaiting(t, keyed, "ceiling(project=default) <= 1", from)
	require.Equal(t, wire.GlobalParallelism{Max: 1, Count: 1}, env.globalParallelism(t))
	require.Equal(t, []string{"x"}, flowKeys(env.flowList(t, "")), "deliveries without a key are not a key")

	// The ceiling is per project.
	require.Equal(t, wire.GlobalParallelism{Max: 1, Count: 0}, other.globalParallelism(t))
	theirs := other.publishFlow(t, dest, "x", "parallelism=5")
	require.Equal(t, []string{plain, theirs}, ep.waitArrivals(t, 2))
	require.Equal(t, wire.GlobalParallelism{Max: 1, Count: 1}, other.globalParallelism(t))

	ep.release(t, plain)
	require.Equal(t, []string{plain, theirs, keyed}, ep.waitArrivals(t, 3))
	env.eventuallyFlow(t, "x", "started", func(i wire.FlowControlInfo) bool { return i.WaitListSize == 0 && i.ParallelismCount == 1 })
	require.Nil(t, env.waiting(t, keyed))
	require.Equal(t, wire.GlobalParallelism{Max: 1, Count: 1}, env.globalParallelism(t))
}
