package h1

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordingFallback is a Fallback that records what it was given and answers 299.
type recordingFallback struct {
	mu        sync.Mutex
	urls      []string
	closeIdle atomic.Int64
}

func (f *recordingFallback) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.urls = append(f.urls, req.URL.String())
	f.mu.Unlock()
	closeBody(req)
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

func (f *recordingFallback) CloseIdleConnections() { f.closeIdle.Add(1) }

func (f *recordingFallback) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.urls...)
}

// newTestTransport is a Transport dialing with a plain net.Dialer; cfg's zero Dial and
// Fallback are filled in. Its idle connections are closed when the test ends.
func newTestTransport(t testing.TB, cfg Config) (*Transport, *recordingFallback) {
	t.Helper()
	fb := &recordingFallback{}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	}
	if cfg.Fallback == nil {
		cfg.Fallback = fb
	}
	tr, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(tr.CloseIdleConnections)
	return tr, fb
}

// countingServer is an httptest server that counts the connections it accepted and the
// ones it saw closed.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountingServer(t testing.TB, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// do sends one request through tr and returns the answer with its body read to the end
// and closed.
func do(t testing.TB, tr http.RoundTripper, method, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), method, url, body))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, string(b)
}

func newRequest(t testing.TB, ctx context.Context, method, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	require.NoError(t, err)
	return req
}

// idleConn is the one idle connection to addr (host:port).
func idleConn(t testing.TB, tr *Transport, addr string) *conn {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Len(t, tr.idle[addr], 1, "idle connections to %s", addr)
	return tr.idle[addr][0]
}

// trackedBody is a request body that records being closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }
