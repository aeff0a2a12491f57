package replica

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// A follower reads a request's whole body before forwarding it (so that it can send it
// again to the next leader), before the leader checks anything. What keeps that from
// holding the memory of the process: a declared length over the route's limit is
// refused unread, a body must arrive within BodyTimeout, all bodies being read or
// forwarded at once share MaxBufferedBytes, and a request without a valid token gets
// the small limit on every route and a quarter of the budget only.

// bodyLimit is the largest body the leader takes on r's route: a batch, an app's
// definitions or a list of events may be MaxBodyBytes; a URL group's endpoints 256 KiB;
// a workflow message (a trigger, or a publish naming a run) MaxWorkflowMessageBytes;
// anything else MaxMessageBytes.
func (f *Forwarder) bodyLimit(r *http.Request) int64 {
	p := r.URL.Path
	switch {
	case p == "/v2/batch" || p == "/events" || strings.HasPrefix(p, "/apps/"):
		return f.cfg.MaxBodyBytes
	case strings.HasPrefix(p, "/v2/trigger/") || r.Header.Get(wire.HeaderWorkflowRunID) != "":
		return min(max(f.cfg.MaxWorkflowMessageBytes, f.cfg.MaxMessageBytes), f.cfg.MaxBodyBytes)
	case strings.HasPrefix(p, "/v2/topics/"):
		return min(max(f.cfg.MaxMessageBytes, maxEndpointsBody), f.cfg.MaxBodyBytes)
	}
	return min(f.cfg.MaxMessageBytes, f.cfg.MaxBodyBytes)
}

// maxEndpointsBody is the leader's limit of a URL group's endpoints body.
const maxEndpointsBody = 256 << 10

// bodyError is a refusal of readBody, with the status it answers.
type bodyError struct {
	status int
	msg    string
}

func (e *bodyError) Error() string { return e.msg }

// readBody reads r's body within its route's limit, the body timeout and the shared
// budget. release gives its bytes back to the budget once the request is done.
func (f *Forwarder) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	limit, budget := f.bodyLimit(r), f.buffered
	if r.ContentLength != 0 && f.cfg.Authorized != nil && !f.cfg.Authorized(r) {
		limit, budget = min(limit, f.cfg.MaxMessageBytes), f.anon
	}
	if r.ContentLength > limit {
		return nil, nil, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is larger than the %d bytes this route takes", r.ContentLength, limit)}
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, func() {}, nil
	}
	// Bodies whose length is declared reserve it up front; others as they arrive.
	reserve := int64(0)
	if r.ContentLength > 0 {
		reserve = r.ContentLength
		if !budget.take(reserve) {
			return nil, nil, f.budgetError(budget)
		}
	}
	taken := reserve
	release = func() { budget.give(taken) }
	_ = http.NewResponseController(w).SetReadDeadline(f.cfg.Now().Add(f.cfg.BodyTimeout))
	defer func() { _ = http.NewResponseController(w).SetReadDeadline(time.Time{}) }()
	if reserve > 0 {
		// The declared length, read straight into a buffer of that size (net/http's body
		// reader stops at it): no chunk to copy through.
		buf := make([]byte, reserve)
		if _, rerr := io.ReadFull(r.Body, buf); rerr != nil {
			release()
			return nil, nil, readError(rerr, f.cfg.BodyTimeout)
		}
		return buf, release, nil
	}
	var buf []byte
	chunk := make([]byte, 32<<10)
	for {
		n, rerr := r.Body.Read(chunk)
		if int64(len(buf)+n) > limit {
			release()
			return nil, nil, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than the %d bytes this route takes", limit)}
		}
		if extra := int64(len(buf)+n) - taken; extra > 0 {
			if !budget.take(extra) {
				release()
				return nil, nil, f.budgetError(budget)
			}
			taken += extra
		}
		buf = append(buf, chunk[:n]...)
		if errors.Is(rerr, io.EOF) {
			return buf, release, nil
		}
		if rerr != nil {
			release()
			return nil, nil, readError(rerr, f.cfg.BodyTimeout)
		}
	}
}

// readError is the answer to a body that could not be read: 408 when it did not arrive
// in time, 400 otherwise (a connection closed early, a malformed chunk).
func readError(err error, timeout time.Duration) error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return &bodyError{http.StatusRequestTimeout, fmt.Sprintf("request body not received within %s", timeout)}
	}
	return &bodyError{http.StatusBadRequest, "read request body: " + err.Error()}
}

func (f *Forwarder) budgetError(b *byteBudget) error {
	whose := "with a valid token"
	if b == f.anon {
		whose = "without a valid token"
	}
	return &bodyError{http.StatusServiceUnavailable, fmt.Sprintf("this replica is holding %d bytes of request bodies %s, its limit; retry shortly", b.limit, whose)}
}

// byteBudget counts bytes held against a limit.
type byteBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
