// Package deliverytest is the test kit of the engine and of everything above it: a
// recording HTTP endpoint on loopback, test signals (river's testsignal idea: the code
// under test, through a hook, or the endpoint records events, and a test waits for the
// ones it expects, woken by each new event instead of polling), and the one poller for
// what only another process can tell. Test support only: production packages never
// import it. It imports nothing of the module, so any package's tests can use it.
package deliverytest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// TB is the part of testing.TB the kit uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Signal is an append-only log of events that tests wait on. The zero value is ready.
type Signal[T any] struct {
	mu      sync.Mutex
	events  []T
	changed chan struct{} // closed and replaced on every event
}

// Emit records an event and wakes the waiters.
func (s *Signal[T]) Emit(v T) {
	s.mu.Lock()
	s.events = append(s.events, v)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// All returns the events so far, oldest first.
func (s *Signal[T]) All() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.events...)
}

// Matching returns the events so far that match.
func (s *Signal[T]) Matching(match func(T) bool) []T {
	var out []T
	for _, e := range s.All() {
		if match == nil || match(e) {
			out = append(out, e)
		}
	}
	return out
}

// Wait waits until n events match and returns the matching ones (at least n), failing
// the test after timeout.
func (s *Signal[T]) Wait(t TB, timeout time.Duration, n int, match func(T) bool) []T {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var got []T
		for _, e := range s.events {
			if match == nil || match(e) {
				got = append(got, e)
			}
		}
		if len(got) >= n {
			s.mu.Unlock()
			return got
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %s: %d of %d expected events", timeout, len(got), n)
			return got
		}
	}
}

// Request is one request an Endpoint received.
type Request struct {
	At     time.Time
	Method string
	URL    string // scheme, host and request URI as received
	Path   string
	Header http.Header
	Body   []byte
}

// Respond answers a request; n counts the earlier requests to the same path.
type Respond func(r *http.Request, n int) (status int, header http.Header, body string)

// Endpoint is a destination on 127.0.0.1 that records every request in Requests and
// answers with its Respond function (default: 200 "ok").
type Endpoint struct {
	Requests Signal[Request]

	srv     *httptest.Server
	respond Respond
	mu      sync.Mutex
	perPath map[string]int
}

// NewEndpoint starts an endpoint, closed in t's cleanup.
func NewEndpoint(t TB, respond Respond) *Endpoint {
	ep := &Endpoint{respond: respond, perPath: map[string]int{}}
	ep.srv = httptest.NewServer(http.HandlerFunc(ep.serve))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body)) // Respond may read it again
	ep.mu.Lock()
	n := ep.perPath[r.URL.Path]
	ep.perPath[r.URL.Path]++
	ep.mu.Unlock()
	ep.Requests.Emit(Request{At: time.Now(), Method: r.Method, URL: "http://" + r.Host + r.RequestURI, Path: r.URL.Path,
		Header: r.Header.Clone(), Body: body})
	status, header, answer := http.StatusOK, http.Header(nil), "ok"
	if ep.respond != nil {
		status, header, answer = ep.respond(r, n)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// URL is the endpoint's URL for pathAndQuery (which starts with "/").
func (ep *Endpoint) URL(pathAndQuery string) string { return ep.srv.URL + pathAndQuery }

// OnPath matches the requests to path.
func OnPath(path string) func(Request) bool { return func(r Request) bool { return r.Path == path } }

// Eventually polls cond until it holds, failing after timeout with what (and describe's
// account, when given). It is the kit's one poller, for state that no event announces:
// another process's HTTP API (a real duraton, an SDK host), or a gauge such as a queue's
// lag. What the engine records is waited on through signals (delivery.Hooks.Recorded).
func Eventually(t TB, timeout time.Duration, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			extra := ""
			for _, d := range describe {
				extra += ": " + d()
			}
			t.Fatalf("timed out after %s waiting for %s%s", timeout, what, extra)
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
