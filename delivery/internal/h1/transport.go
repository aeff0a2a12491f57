// Package h1 owns the HTTP client of plain http:// deliveries: a synchronous HTTP/1.1
// transport that writes a request and reads its answer on the calling goroutine, over a
// pool of keep-alive connections.
//
// Why not net/http's Transport: it hands every request to two goroutines per connection
// (a writer and a reader) and brings the answer back over channels. On loopback that
// handoff shows: BenchmarkRoundTrip (transport_bench_test.go, 64
// senders, both sides in one process) gives 17 µs and 49 allocations per exchange
// against 23–26 µs and 71. Deliveries are Duraton's hottest path, so plain http://
// takes this one.
//
// It does less than net/http and hands the rest to Config.Fallback: https:// (TLS and
// HTTP/2), a request that expects 100-continue or asks to upgrade, any other scheme.
// What it keeps from net/http: the answer is parsed by http.ReadResponse, the code
// net/http's Transport uses, and the request is written as (*http.Request).Write writes
// it (write.go: a delivery's common shape directly, any other by Request.Write); header
// fields are validated as that Transport validates them; 1xx answers are skipped; an answer's
// headers are capped; a connection is reused only after its answer was read to the end
// and neither side asked to close it.
//
// A request is never written twice. An idle connection the server has closed (Node
// closes them after 5 s) is noticed before reuse by a non-blocking peek (alive_unix.go),
// where net/http's reader goroutine would have noticed it. A server that announces when
// it closes idle connections (Keep-Alive: timeout=N, as Node does) is taken at its word,
// less a second, as undici does: a request sent just as the server closes would fail,
// and neither the peek nor net/http's reader can see that close coming.
//
// It is internal to delivery: the engine builds it in send.go, and delivery's
// NewClientTransport hands the same client to `duraton bench floor`.
package h1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults of Config.
const (
	DefaultMaxIdlePerHost         = 256
	DefaultMaxIdle                = 1024
	DefaultIdleTimeout            = 90 * time.Second
	DefaultMaxResponseHeaderBytes = 1 << 20
)

// Config configures a Transport. Dial and Fallback are required.
type Config struct {
	// Dial opens a connection to "host:port" (the SSRF-guarded dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Fallback carries the requests this transport does not (see the package doc).
	Fallback http.RoundTripper
	// MaxIdlePerHost caps the idle connections kept per host:port. Default 256.
	MaxIdlePerHost int
	// MaxIdle caps the idle connections kept in all. Default 1024.
	MaxIdle int
	// IdleTimeout closes a connection idle for longer. Default 90 s.
	IdleTimeout time.Duration
	// MaxResponseHeaderBytes caps an answer's status line and headers. Default 1 MiB.
	MaxResponseHeaderBytes int64
	// Now is the clock idle ages are measured with. Default time.Now.
	Now func() time.Time
}

// Transport is an http.RoundTripper; safe for concurrent use.
type Transport struct {
	cfg Config

	mu        sync.Mutex
	idle      map[string][]*conn // by host:port, most recently used last
	idleCount int
	sweeper   *time.Timer // armed while connections are idle
}

// New returns a Transport, or an error naming what is wrong with cfg.
func New(cfg Config) (*Transport, error) {
	switch {
	case cfg.Dial == nil:
		return nil, errors.New("h1: Config.Dial is required")
	case cfg.Fallback == nil:
		return nil, errors.New("h1: Config.Fallback is required")
	case cfg.MaxIdlePerHost < 0, cfg.MaxIdle < 0, cfg.IdleTimeout < 0, cfg.MaxResponseHeaderBytes < 0:
		return nil, errors.New("h1: Config limits must not be negative")
	}
	if cfg.MaxIdlePerHost == 0 {
		cfg.MaxIdlePerHost = DefaultMaxIdlePerHost
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = DefaultMaxIdle
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxResponseHeaderBytes == 0 {
		cfg.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Transport{cfg: cfg, idle: map[string][]*conn{}}, nil
}

// RoundTrip sends req and returns its answer. The answer's body must be closed; the
// connection goes back to the pool when it was read to the end first.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !handles(req) {
		return t.cfg.Fallback.RoundTrip(req)
	}
	if err := validRequest(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil { // nothing is written for a request already given up
		closeBody(req)
		return nil, fmt.Errorf("h1: %w", err)
	}
	addr := hostPort(req)
	c, err := t.get(ctx, addr)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := c.roundTrip(req, t.cfg.MaxResponseHeaderBytes)
	if err != nil {
		c.close()
		return nil, err
	}
	resp.Body = &body{header: resp.Header, ctx: ctx, rc: resp.Body, c: c, t: t, addr: addr, length: resp.ContentLength,
		keep: !resp.Close && !req.Close, done: resp.Body == http.NoBody}
	return resp, nil
}

// handles reports whether req is one this transport sends itself.
func handles(req *http.Request) bool {
	u := req.URL
	return u != nil && u.Scheme == "http" && u.Host != "" && req.Method != http.MethodConnect &&
		req.Header["Expect"] == nil && req.Header["Upgrade"] == nil
}

// hostPort is the address req is sent to: the URL's host and port, 80 by default.
func hostPort(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// validRequest refuses what net/http's Transport refuses: a method that is not a token
// (a space or CR LF in it would smuggle a request line), and in the header and the
// trailer a field name that is not a token or a value with a control character (CR, LF:
// a header injection).
func validRequest(req *http.Request) error {
	if req.Method != "" && !isToken(req.Method) {
		return fmt.Errorf("h1: invalid method %q", req.Method)
	}
	if err := validFields("header", req.Header); err != nil {
		return err
	}
	return validFields("trailer", req.Trailer)
}

func validFields(what string, h http.Header) error {
	for name, values := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Errorf("h1: invalid %s field name %q", what, name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				// Not the value: it may be a secret.
				return fmt.Errorf("h1: invalid %s field value for %q", what, name)
			}
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, as a method must be.
func isToken(s string) bool {
	for _, r := range s {
		if !httpguts.IsTokenRune(r) {
			return false
		}
	}
	return s != ""
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// get returns an idle connection to addr that is still open, or a new one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, error) {
	now := t.cfg.Now()
	for {
		t.mu.Lock()
		list := t.idle[addr]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.setIdle(addr, list[:len(list)-1])
		t.mu.Unlock()
		if idle := now.Sub(c.idleSince); idle <= t.cfg.IdleTimeout && (c.keepFor == 0 || idle <= c.keepFor) && c.alive() {
			return c, nil
		}
		c.close()
	}
	nc, err := t.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(nc), nil
}

// put keeps c for the next request to addr, or closes it when the pool is full.
func (t *Transport) put(addr string, c *conn) {
	c.idleSince = t.cfg.Now()
	t.mu.Lock()
	list := t.idle[addr]
	if len(list) >= t.cfg.MaxIdlePerHost || t.idleCount >= t.cfg.MaxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	t.setIdle(addr, append(list, c))
	if t.sweeper == nil {
		t.sweeper = time.AfterFunc(t.cfg.IdleTimeout, t.sweep)
	}
	t.mu.Unlock()
}

// setIdle replaces addr's idle list, keeping the count. t.mu is held.
func (t *Transport) setIdle(addr string, list []*conn) {
	t.idleCount += len(list) - len(t.idle[addr])
	if len(list) == 0 {
		delete(t.idle, addr)
		return
	}
	t.idle[addr] = list
}

// sweep closes the connections idle for longer than IdleTimeout, and comes back while
// any stay idle.
func (t *Transport) sweep() {
	now := t.cfg.Now()
	var expired []*conn
	t.mu.Lock()
	for addr, list := range t.idle {
		// Oldest first: the expired ones are a prefix.
		n := 0
		for n < len(list) && now.Sub(list[n].idleSince) > t.cfg.IdleTimeout {
			n++
		}
		expired = append(expired, list[:n]...)
		t.setIdle(addr, append([]*conn(nil), list[n:]...))
	}
	t.sweeper = nil
	if t.idleCount > 0 {
		// Back when the oldest connection left expires, not a whole IdleTimeout later.
		oldest := now
		for _, list := range t.idle {
			if list[0].idleSince.Before(oldest) {
				oldest = list[0].idleSince
			}
		}
		t.sweeper = time.AfterFunc(max(oldest.Add(t.cfg.IdleTimeout).Sub(now), t.cfg.IdleTimeout/16), t.sweep)
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// CloseIdleConnections closes the idle connections, and the Fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.idleCount = map[string][]*conn{}, 0
	if t.sweeper != nil {
		t.sweeper.Stop()
		t.sweeper = nil
	}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.close()
		}
	}
	if ci, ok := t.cfg.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// idleConns is how many connections are idle (tests).
func (t *Transport) idleConns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idleCount
}
