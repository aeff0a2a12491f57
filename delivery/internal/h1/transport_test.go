package h1

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoHandler answers with the request's method and body, and echoes X-Echo back.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Echo", r.Header.Get("X-Echo"))
	w.Header().Set("Content-Length", strconv.Itoa(len(r.Method)+1+len(b)))
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, r.Method+" "+string(b))
}

func TestKeepAliveReuse(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{})
	for i := range 100 {
		body := fmt.Sprintf("request %d", i)
		req := newRequest(t, context.Background(), http.MethodPost, srv.URL+"/p?i="+strconv.Itoa(i), body)
		req.Header.Set("X-Echo", strconv.Itoa(i))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, strconv.Itoa(i), resp.Header.Get("X-Echo"))
		require.Equal(t, "POST "+body, string(b))
		require.Equal(t, int64(len(b)), resp.ContentLength)
	}
	require.Equal(t, int64(1), srv.opened.Load(), "connections opened for 100 sequential requests")
	require.Equal(t, 1, tr.idleConns())
}

func TestChunkedAnswerReadToEOFIsReused(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "first part,")
		w.(http.Flusher).Flush() // no Content-Length: chunked
		_, _ = io.WriteString(w, "second part")
	})
	tr, _ := newTestTransport(t, Config{})
	for range 3 {
		resp, b := do(t, tr, http.MethodGet, srv.URL, "")
		require.Equal(t, []string{"chunked"}, resp.TransferEncoding)
		require.Equal(t, "first part,second part", b)
	}
	require.Equal(t, int64(1), srv.opened.Load())
	require.Equal(t, 1, tr.idleConns())
}

func TestAnswerPartlyReadClosesConnection(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	srv := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, long)
	})
	tr, _ := newTestTransport(t, Config{})
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 100))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 0, tr.idleConns())
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the server sees the connection closed")
	_, err = resp.Body.Read(make([]byte, 1))
	require.ErrorIs(t, err, errBodyClosed)

	_, b := do(t, tr, http.MethodGet, srv.URL, "")
	require.Equal(t, long, b)
	require.Equal(t, int64(2), srv.opened.Load(), "the next request dials anew")
}

func TestKnownLengthReadExactlyIsReused(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	})
	tr, _ := newTestTransport(t, Config{})
	for range 3 {
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
		require.NoError(t, err)
		buf := make([]byte, 5)
		_, err = io.ReadFull(resp.Body, buf) // never sees io.EOF
		require.NoError(t, err)
		require.Equal(t, "hello", string(buf))
		require.NoError(t, resp.Body.Close())
		require.Equal(t, 1, tr.idleConns())
	}
	require.Equal(t, int64(1), srv.opened.Load())
}

func TestServerConnectionCloseDialsAnew(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	tr, _ := newTestTransport(t, Config{})
	for i := range 3 {
		resp, b := do(t, tr, http.MethodGet, srv.URL, "")
		require.True(t, resp.Close)
		require.Equal(t, "bye", b)
		require.Equal(t, 0, tr.idleConns())
		require.Equal(t, int64(i+1), srv.opened.Load())
	}
}

func TestRequestConnectionCloseIsNotReused(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{})
	for i := range 2 {
		req := newRequest(t, context.Background(), http.MethodGet, srv.URL, "")
		req.Close = true
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, 0, tr.idleConns())
		require.Equal(t, int64(i+1), srv.opened.Load())
	}
}

func TestHeadAndNoContentAreReused(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", "42")
	})
	tr, _ := newTestTransport(t, Config{})
	resp, b := do(t, tr, http.MethodHead, srv.URL, "")
	require.Equal(t, int64(42), resp.ContentLength)
	require.Empty(t, b)
	resp, _ = do(t, tr, http.MethodGet, srv.URL+"/204", "")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, int64(1), srv.opened.Load())
	require.Equal(t, 1, tr.idleConns())
}

func TestFallback(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(echoHandler))
	t.Cleanup(tlsSrv.Close)
	tr, fb := newTestTransport(t, Config{})

	resp, _ := do(t, tr, http.MethodGet, tlsSrv.URL+"/tls", "")
	require.Equal(t, 299, resp.StatusCode)

	req := newRequest(t, context.Background(), http.MethodPost, srv.URL+"/expect", "body")
	req.Header.Set("Expect", "100-continue")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, 299, resp.StatusCode)

	req = newRequest(t, context.Background(), http.MethodGet, srv.URL+"/upgrade", "")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err = tr.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, 299, resp.StatusCode)

	resp, b := do(t, tr, http.MethodPost, srv.URL+"/plain", "x")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "POST x", b)

	require.Equal(t, []string{tlsSrv.URL + "/tls", srv.URL + "/expect", srv.URL + "/upgrade"}, fb.seen())
	require.Equal(t, int64(1), srv.opened.Load(), "only the plain request reached the server")
}

func TestConcurrentRequests(t *testing.T) {
	const workers, perWorker, maxIdle = 32, 50, 4
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{MaxIdlePerHost: maxIdle})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				body := fmt.Sprintf("%d/%d", w, i)
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodPost, srv.URL, body))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated || string(b) != "POST "+body {
					errs <- fmt.Errorf("request %s: status %d, body %q, err %v", body, resp.StatusCode, b, err)
					return
				}
				if n := tr.idleConns(); n > maxIdle {
					errs <- fmt.Errorf("%d idle connections, more than MaxIdlePerHost", n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, tr.idleConns(), maxIdle)
	require.Positive(t, tr.idleConns())
	// A connection is only dialed when none is idle; the ones the full pool closed are
	// redialed, so allow for churn but not one connection per request.
	t.Logf("%d connections for %d requests", srv.opened.Load(), workers*perWorker)
	require.Less(t, srv.opened.Load(), int64(workers*perWorker/4)) // 32 to 55 seen
}

// fakeClock is an injected Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestIdleTimeoutOnReuse(t *testing.T) {
	const idle = time.Hour // the real sweeper never fires during the test
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{IdleTimeout: idle, Now: clock.Now})

	do(t, tr, http.MethodGet, srv.URL, "")
	clock.advance(idle) // exactly IdleTimeout: still usable
	do(t, tr, http.MethodGet, srv.URL, "")
	require.Equal(t, int64(1), srv.opened.Load())
	require.Equal(t, int64(0), srv.closed.Load())

	clock.advance(idle + time.Second)
	do(t, tr, http.MethodGet, srv.URL, "")
	require.Equal(t, int64(2), srv.opened.Load(), "an expired connection is not reused")
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the expired connection is closed")
	require.Equal(t, 1, tr.idleConns())
}

func TestSweepClosesExpiredOnly(t *testing.T) {
	const idle = time.Hour
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{IdleTimeout: idle, Now: clock.Now})
	addr := srv.Listener.Addr().String()

	// Two answers open at once: two connections.
	old, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	fresh, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, old.Body)
	require.NoError(t, err)
	require.NoError(t, old.Body.Close())
	clock.advance(idle / 2)
	_, err = io.Copy(io.Discard, fresh.Body)
	require.NoError(t, err)
	require.NoError(t, fresh.Body.Close())
	require.Equal(t, 2, tr.idleConns())
	tr.mu.Lock()
	freshConn := tr.idle[addr][1]
	tr.mu.Unlock()

	clock.advance(idle/2 + time.Second) // old: idle for longer than IdleTimeout; fresh: not
	tr.sweep()
	require.Equal(t, 1, tr.idleConns())
	require.Same(t, freshConn, idleConn(t, tr, addr))
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the server sees the expired connection closed")
	tr.mu.Lock()
	require.NotNil(t, tr.sweeper, "the sweeper comes back while connections stay idle")
	tr.mu.Unlock()

	clock.advance(idle)
	tr.sweep()
	require.Equal(t, 0, tr.idleConns())
	require.Empty(t, tr.idle)
	require.Eventually(t, func() bool { return srv.closed.Load() == 2 }, 5*time.Second, 5*time.Millisecond)
	tr.mu.Lock()
	require.Nil(t, tr.sweeper, "no sweeper without idle connections")
	tr.mu.Unlock()
}

// The most recently used idle connection goes first: the others age and expire.
func TestMostRecentlyUsedFirst(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{})
	addr := srv.Listener.Addr().String()
	a, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	b, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	for _, resp := range []*http.Response{a, b} {
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	tr.mu.Lock()
	older, newer := tr.idle[addr][0], tr.idle[addr][1]
	tr.mu.Unlock()
	for range 3 {
		do(t, tr, http.MethodGet, srv.URL, "")
		tr.mu.Lock()
		list := tr.idle[addr]
		tr.mu.Unlock()
		// Not require.Equal: its diff of two *conn would print whole sockets.
		require.True(t, len(list) == 2 && list[0] == older && list[1] == newer,
			"the newer connection was used and put back last")
	}
}

func TestSweeperTimerFires(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{IdleTimeout: 50 * time.Millisecond})
	do(t, tr, http.MethodGet, srv.URL, "")
	require.Eventually(t, func() bool { return tr.idleConns() == 0 && srv.closed.Load() == 1 },
		5*time.Second, 10*time.Millisecond, "the sweeper closes the idle connection")
}

func TestCloseIdleConnections(t *testing.T) {
	srv := newCountingServer(t, echoHandler)
	tr, fb := newTestTransport(t, Config{})
	a, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, ""))
	require.NoError(t, err)
	do(t, tr, http.MethodGet, srv.URL, "")
	require.Equal(t, 1, tr.idleConns())

	tr.CloseIdleConnections()
	require.Equal(t, 0, tr.idleConns())
	require.Equal(t, int64(1), fb.closeIdle.Load(), "the Fallback's idle connections are closed too")
	require.Eventually(t, func() bool { return srv.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)

	// The answer still open is not affected: read and closed, its connection is kept.
	b, err := io.ReadAll(a.Body)
	require.NoError(t, err)
	require.Equal(t, "GET ", string(b))
	require.NoError(t, a.Body.Close())
	require.Equal(t, 1, tr.idleConns())
	require.Equal(t, int64(1), srv.closed.Load())
}

func TestMaxIdleCapsAllHosts(t *testing.T) {
	srvA := newCountingServer(t, echoHandler)
	srvB := newCountingServer(t, echoHandler)
	tr, _ := newTestTransport(t, Config{MaxIdle: 1})
	do(t, tr, http.MethodGet, srvA.URL, "")
	do(t, tr, http.MethodGet, srvB.URL, "")
	require.Equal(t, 1, tr.idleConns())
	require.Eventually(t, func() bool { return srvB.closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the connection beyond MaxIdle is closed")
	require.Equal(t, int64(0), srvA.closed.Load())
}

func TestNewValidation(t *testing.T) {
	dial := (&net.Dialer{}).DialContext
	fb := &recordingFallback{}
	for name, cfg := range map[string]Config{
		"Dial":                   {Fallback: fb},
		"Fallback":               {Dial: dial},
		"MaxIdlePerHost":         {Dial: dial, Fallback: fb, MaxIdlePerHost: -1},
		"MaxIdle":                {Dial: dial, Fallback: fb, MaxIdle: -1},
		"IdleTimeout":            {Dial: dial, Fallback: fb, IdleTimeout: -1},
		"MaxResponseHeaderBytes": {Dial: dial, Fallback: fb, MaxResponseHeaderBytes: -1},
	} {
		_, err := New(cfg)
		assert.Error(t, err, name)
		if strings.HasPrefix(name, "Max") || name == "IdleTimeout" {
			assert.ErrorContains(t, err, "negative", name)
		} else {
			assert.ErrorContains(t, err, name, name)
		}
	}
	tr, err := New(Config{Dial: dial, Fallback: fb})
	require.NoError(t, err)
	require.Equal(t, DefaultMaxIdlePerHost, tr.cfg.MaxIdlePerHost)
	require.Equal(t, DefaultMaxIdle, tr.cfg.MaxIdle)
	require.Equal(t, DefaultIdleTimeout, tr.cfg.IdleTimeout)
	require.Equal(t, int64(DefaultMaxResponseHeaderBytes), tr.cfg.MaxResponseHeaderBytes)
	require.NotNil(t, tr.cfg.Now)
}
