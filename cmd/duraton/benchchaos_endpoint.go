package main

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/sdk"
)

// chaosCounts are what the chaos endpoint did to the deliveries it got.
type chaosCounts struct {
	Requests      int64 `json:"requests"`
	Failed        int64 `json:"failed_500"`
	Hung          int64 `json:"hung"`
	Slow          int64 `json:"slow"`
	DroppedBefore int64 `json:"dropped_before_handling"`
	DroppedAfter  int64 `json:"dropped_after_handling"`
}

// chaosEndpoint serves the bench's workflow (a Go SDK route, or with
// --endpoint=ts-native a proxy to @duraton/sdk in a node child) and its plain messages,
// misbehaving at random: it answers 500, hangs until the server gives up, answers slowly,
// or drops the connection, before or after the request was handled (after: the step's
// result was published but the delivery never hears the answer).
type chaosEndpoint struct {
	handler http.Handler   // the SDK route (set before the endpoint serves)
	stop    chan struct{}  // closed by close: hung requests end
	active  sync.WaitGroup // requests being served

	mu        sync.Mutex
	rng       *rand.Rand
	delivered map[int]bool    // plain messages answered 200, by number
	finished  map[string]bool // runs whose route ran to its end
	execs     atomic.Int64    // step function executions (at least once: may repeat)

	requests, failed, hung, slow, droppedBefore, droppedAfter atomic.Int64
}

func newChaosEndpoint(seed uint64, serveEnv func(string) string) *chaosEndpoint {
	ep := &chaosEndpoint{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), delivered: map[int]bool{}, finished: map[string]bool{}, stop: make(chan struct{})}
	ep.handler = sdk.Serve(ep.route, sdk.WithServeEnv(serveEnv))
	return ep
}

// route is the bench's workflow: three steps around a one-second sleep.
func (ep *chaosEndpoint) route(c *sdk.Context) (any, error) {
	step := func(name string) error {
		_, err := sdk.Run(c, name, func() (string, error) {
			ep.execs.Add(1)
			return name + " done", nil
		})
		return err
	}
	if err := step("first"); err != nil {
		return nil, err
	}
	if err := c.Sleep("nap", time.Second); err != nil {
		return nil, err
	}
	if err := step("second"); err != nil {
		return nil, err
	}
	if err := step("third"); err != nil {
		return nil, err
	}
	ep.mu.Lock()
	ep.finished[c.RunID] = true
	ep.mu.Unlock()
	return "ok", nil
}

func (ep *chaosEndpoint) roll() float64 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.rng.Float64()
}

func (ep *chaosEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep.active.Add(1)
	defer ep.active.Done()
	ep.requests.Add(1)
	switch p := ep.roll(); {
	case p < 0.10:
		ep.failed.Add(1)
		http.Error(w, "chaos: failing", http.StatusInternalServerError)
		return
	case p < 0.13:
		ep.hung.Add(1)
		select { // until Duraton's attempt timeout closes the connection
		case <-r.Context().Done():
		case <-ep.stop:
		}
		return
	case p < 0.17:
		ep.droppedBefore.Add(1)
		drop(w)
		return
	case p < 0.21:
		ep.droppedAfter.Add(1)
		ep.serve(httptest.NewRecorder(), r)
		drop(w)
		return
	case p < 0.31:
		ep.slow.Add(1)
		time.Sleep(time.Duration(50+ep.roll()*450) * time.Millisecond)
	}
	ep.serve(w, r)
}

// serve handles a request for real: a plain message is recorded, a workflow delivery goes
// to the SDK.
func (ep *chaosEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	if n, ok := strings.CutPrefix(r.URL.Path, "/msg/"); ok {
		i, err := strconv.Atoi(n)
		if err != nil {
			http.Error(w, "bad message number", http.StatusBadRequest)
			return
		}
		ep.mu.Lock()
		ep.delivered[i] = true
		ep.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	ep.handler.ServeHTTP(w, r)
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("chaos: the response writer cannot be hijacked") // net/http's HTTP/1 writer can
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}

// close ends hung requests and waits for every request being served.
func (ep *chaosEndpoint) close() {
	close(ep.stop)
	ep.active.Wait()
}

func (ep *chaosEndpoint) counts() chaosCounts {
	return chaosCounts{
		Requests: ep.requests.Load(), Failed: ep.failed.Load(), Hung: ep.hung.Load(), Slow: ep.slow.Load(),
		DroppedBefore: ep.droppedBefore.Load(), DroppedAfter: ep.droppedAfter.Load(),
	}
}

func (ep *chaosEndpoint) finishedRuns() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return len(ep.finished)
}

func (ep *chaosEndpoint) wasDelivered(i int) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.delivered[i]
}
