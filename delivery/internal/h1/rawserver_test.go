package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawServer is a loopback listener whose connections are served by hand, for answers
// net/http's server cannot give (1xx, HTTP/1.0, huge headers, stalls, stray bytes).
type rawServer struct {
	ln    net.Listener
	url   string
	conns atomic.Int64 // accepted
	reqs  atomic.Int64 // requests read, over all connections

	mu    sync.Mutex
	open  []net.Conn
	heads []http.Header // the headers of every request read
	wg    sync.WaitGroup
}

// rawConn is one accepted connection handed to the serving function.
type rawConn struct {
	net.Conn
	s  *rawServer
	br *bufio.Reader
}

// readRequest reads one request and its body, and counts it.
func (c *rawConn) readRequest() (*http.Request, error) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return nil, err
	}
	c.s.reqs.Add(1)
	c.s.mu.Lock()
	c.s.heads = append(c.s.heads, req.Header)
	c.s.mu.Unlock()
	return req, nil
}

// waitClosed blocks until the client closes the connection (or sends something).
func (c *rawConn) waitClosed() error {
	_, err := c.br.ReadByte()
	return err
}

// newRawServer serves each accepted connection with serve, on its own goroutine; the
// connection is closed when serve returns.
func newRawServer(t testing.TB, serve func(c *rawConn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawServer{ln: ln, url: "http://" + ln.Addr().String()}
	s.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.open = append(s.open, nc)
			s.mu.Unlock()
			s.wg.Go(func() {
				defer nc.Close()
				serve(&rawConn{Conn: nc, s: s, br: bufio.NewReader(nc)})
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, nc := range s.open {
			_ = nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

// answerAll answers every request on the connection with answer.
func answerAll(answer string) func(c *rawConn) {
	return func(c *rawConn) {
		for {
			if _, err := c.readRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// answerOKThen answers every request with okAnswer. On the server's first connection,
// after the first answer, it waits for signal and then does then, which says whether
// the connection goes on serving (false: it is closed).
func answerOKThen(signal <-chan struct{}, then func(c *rawConn) bool) func(c *rawConn) {
	return func(c *rawConn) {
		first := c.s.conns.Load() == 1
		for {
			if _, err := c.readRequest(); err != nil {
				return
			}
			if _, err := io.WriteString(c, okAnswer); err != nil {
				return
			}
			if first {
				<-signal
				if !then(c) {
					return
				}
				first = false
			}
		}
	}
}

func TestHTTP10CloseDelimitedAnswer(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	srv := newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nX-A: b\r\n\r\n"+long) // ends with the close
	})
	tr, _ := newTestTransport(t, Config{})
	for i := range 2 {
		resp, b := do(t, tr, http.MethodGet, srv.url, "")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "b", resp.Header.Get("X-A"))
		require.Equal(t, int64(-1), resp.ContentLength)
		require.Equal(t, long, b)
		require.Equal(t, 0, tr.idleConns())
		require.Equal(t, int64(i+1), srv.conns.Load())
	}
}

// The client's Connection: close is honoured even when the server answers keep-alive.
func TestRequestConnectionCloseIsNotReusedByKeepAliveServer(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	for i := range 2 {
		req := newRequest(t, context.Background(), http.MethodGet, srv.url, "")
		req.Close = true
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.False(t, resp.Close, "the server did not ask to close")
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, 0, tr.idleConns())
		require.Equal(t, int64(i+1), srv.conns.Load())
	}
}

func TestHTTP10WithLengthIsNotReused(t *testing.T) {
	srv := newRawServer(t, answerAll("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	tr, _ := newTestTransport(t, Config{})
	for i := range 2 {
		_, b := do(t, tr, http.MethodGet, srv.url, "")
		require.Equal(t, "ok", b)
		require.Equal(t, 0, tr.idleConns())
		require.Equal(t, int64(i+1), srv.conns.Load())
	}
}

// The server closes an idle keep-alive connection (Node does after 5 s): the close is
// seen before reuse, the next request goes on a new connection, and nothing is written
// twice.
func TestServerClosedIdleConnection(t *testing.T) {
	closeNow := make(chan struct{})
	srv := newRawServer(t, answerOKThen(closeNow, func(*rawConn) bool {
		return false // closes the keep-alive connection
	}))
	tr, _ := newTestTransport(t, Config{})
	_, b := do(t, tr, http.MethodPost, srv.url, "one")
	require.Equal(t, "ok", b)
	pooled := idleConn(t, tr, srv.addr())
	require.True(t, pooled.alive())

	close(closeNow)
	require.Eventually(t, func() bool { return !pooled.alive() }, 5*time.Second, 2*time.Millisecond,
		"the server's close becomes visible on the idle connection")

	for range 3 {
		_, b = do(t, tr, http.MethodPost, srv.url, "again")
		require.Equal(t, "ok", b)
	}
	require.Equal(t, int64(2), srv.conns.Load())
	require.Equal(t, int64(4), srv.reqs.Load(), "each request reached the server exactly once")
}

func TestUnsolicitedBytesOnIdleConnection(t *testing.T) {
	sendJunk := make(chan struct{})
	srv := newRawServer(t, answerOKThen(sendJunk, func(c *rawConn) bool {
		_, _ = io.WriteString(c, "HTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\n")
		return true
	}))
	tr, _ := newTestTransport(t, Config{})
	do(t, tr, http.MethodGet, srv.url, "")
	pooled := idleConn(t, tr, srv.addr())
	close(sendJunk)
	require.Eventually(t, func() bool { return !pooled.alive() }, 5*time.Second, 2*time.Millisecond,
		"stray bytes make the idle connection unusable")

	resp, b := do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, 200, resp.StatusCode, "the stray answer is not taken for this request's")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(2), srv.conns.Load())
	require.Equal(t, int64(2), srv.reqs.Load())
}

func TestBytesBufferedAfterAnswerAreNotReused(t *testing.T) {
	// The stray bytes come in the same write as the answer: they sit in the connection's
	// buffer, where a peek cannot see them.
	srv := newRawServer(t, answerAll(okAnswer+"HTTP/1.1 500 Stray\r\nContent-Length: 0\r\n\r\n"))
	tr, _ := newTestTransport(t, Config{})
	for i := range 2 {
		resp, b := do(t, tr, http.MethodGet, srv.url, "")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "ok", b)
		require.Equal(t, 0, tr.idleConns(), "a connection with bytes left over is closed")
		require.Equal(t, int64(i+1), srv.conns.Load())
	}
}

func TestAnswerHeadersLimit(t *testing.T) {
	const limit = 1024
	closed := make(chan error, 1)
	srv := newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		path := c.s.reqs.Load()
		if path == 1 { // just under the limit
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", limit-60)+"\r\nContent-Length: 2\r\n\r\nok")
			if _, err := c.readRequest(); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 8*limit)+"\r\nContent-Length: 2\r\n\r\nok")
		closed <- c.waitClosed()
	})
	tr, _ := newTestTransport(t, Config{MaxResponseHeaderBytes: limit})
	_, b := do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, "ok", b)

	_, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.url, ""))
	require.ErrorContains(t, err, "1024 bytes")
	require.Equal(t, 0, tr.idleConns())
	select {
	case err := <-closed:
		// EOF, or a reset: the client closed with the rest of the answer unread.
		require.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "the client closed the connection: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed")
	}
}

// A header line longer than the connection's 4 KiB read buffer, within the limit, is read.
func TestLongHeaderLineUnderLimit(t *testing.T) {
	long := strings.Repeat("v", 64<<10)
	srv := newRawServer(t, answerAll("HTTP/1.1 200 OK\r\nX-Long: "+long+"\r\nContent-Length: 2\r\n\r\nok"))
	tr, _ := newTestTransport(t, Config{MaxResponseHeaderBytes: 128 << 10})
	for range 2 {
		resp, b := do(t, tr, http.MethodGet, srv.url, "")
		require.Equal(t, long, resp.Header.Get("X-Long"))
		require.Equal(t, "ok", b)
	}
	require.Equal(t, int64(1), srv.conns.Load())
}

// stallServer reads requests and never answers; it reports each request read and, when
// the client closes, the connection's end.
func stallServer(t *testing.T) (srv *rawServer, got chan struct{}, closed chan error) {
	got, closed = make(chan struct{}, 4), make(chan error, 4)
	srv = newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		got <- struct{}{}
		closed <- c.waitClosed()
	})
	return srv, got, closed
}

func requireClosedByClient(t *testing.T, closed chan error) {
	t.Helper()
	select {
	case err := <-closed:
		require.ErrorIs(t, err, io.EOF)
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled connection was not closed")
	}
}

func TestDeadlineWhileServerStalls(t *testing.T) {
	srv, _, closed := stallServer(t)
	tr, _ := newTestTransport(t, Config{})
	const deadline = 200 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, srv.url, "x"))
	elapsed := time.Since(start)
	// Only a timeout: whether it also reads as context.DeadlineExceeded depends on which
	// timer fires first (TestDeadlineErrorWhenSocketTimerFiresFirst).
	var netErr net.Error
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout(),
		"a timeout: %v", err)
	require.GreaterOrEqual(t, elapsed, deadline)
	require.Less(t, elapsed, 5*time.Second)
	require.Equal(t, 0, tr.idleConns())
	requireClosedByClient(t, closed)
	require.Equal(t, int64(1), srv.reqs.Load())
}

func TestCancelWhileServerStalls(t *testing.T) {
	srv, got, closed := stallServer(t)
	tr, _ := newTestTransport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, srv.url, "x"))
		errc <- err
	}()
	<-got
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip did not return after the cancellation")
	}
	require.Equal(t, 0, tr.idleConns())
	requireClosedByClient(t, closed)
	require.Equal(t, int64(1), srv.reqs.Load())
}

// A cancellation after the answer's head arrived fails the body's reads, and the
// connection is not pooled.
func TestCancelWhileReadingBody(t *testing.T) {
	srv := newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		_ = c.waitClosed()
	})
	tr, _ := newTestTransport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.url, ""))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	cancel()
	readErr := make(chan error, 1)
	go func() { _, err := resp.Body.Read(buf); readErr <- err }()
	select {
	case err := <-readErr:
		require.Error(t, err)
		t.Log(err) // TestBodyReadErrorsWrapContext wants context.Canceled
	case <-time.After(5 * time.Second):
		t.Fatal("reading the body goes on after the cancellation")
	}
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 0, tr.idleConns())
}

// Closing a body with a rest unread closes the connection at once: the rest is not
// drained (it may be large, or never come).
func TestUnreadRestIsNotDrained(t *testing.T) {
	closed := make(chan error, 1)
	srv := newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello") // the rest never comes
		closed <- c.waitClosed()
	})
	tr, _ := newTestTransport(t, Config{})
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.url, ""))
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- resp.Body.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for the rest of the body")
	}
	require.Equal(t, 0, tr.idleConns())
	requireClosedByClient(t, closed)
}

func TestInvalidHeaderSendsNothing(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	for name, h := range map[string]http.Header{
		"value with CRLF": {"X-Test": {"a\r\nX-Injected: 1"}},
		"value with LF":   {"X-Test": {"a\nX-Injected: 1"}},
		"name with space": {"Bad Name": {"1"}},
		"name with colon": {"X-Injected: 1\r\nX-A": {"1"}},
	} {
		body := &trackedBody{Reader: strings.NewReader("payload")}
		req, err := http.NewRequest(http.MethodPost, srv.url, body)
		require.NoError(t, err)
		req.Header = h
		_, err = tr.RoundTrip(req)
		require.ErrorContains(t, err, "invalid header field", name)
		require.True(t, body.closed.Load(), "%s: the request's body is closed", name)
	}
	// A valid request afterwards is the only one the server ever sees.
	_, b := do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(1), srv.conns.Load(), "no connection was opened for the refused requests")
	require.Equal(t, int64(1), srv.reqs.Load())
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, h := range srv.heads {
		require.Empty(t, h.Get("X-Injected"))
	}
}

func TestInformationalAnswers(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	for name, tc := range map[string]struct {
		answer string
		err    string
	}{
		"103 then 200":   {answer: hint + okAnswer},
		"five 1xx":       {answer: strings.Repeat(hint, 4) + "HTTP/1.1 100 Continue\r\n\r\n" + okAnswer},
		"six 1xx":        {answer: strings.Repeat(hint, 6) + okAnswer, err: "more than 5 informational"},
		"101":            {answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", err: "101"},
		"103 then 101":   {answer: hint + "HTTP/1.1 101 Switching Protocols\r\n\r\n", err: "101"},
		"garbage answer": {answer: "NOT HTTP\r\n\r\n", err: "malformed HTTP"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newRawServer(t, answerAll(tc.answer))
			tr, _ := newTestTransport(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a 1xx taken for more fails, not hangs
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.url, ""))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Equal(t, 0, tr.idleConns())
				return
			}
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			require.Empty(t, resp.Header.Get("Link"), "the 1xx's headers are not the answer's")
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, "ok", string(b))
			require.NoError(t, resp.Body.Close())
			require.Equal(t, 1, tr.idleConns())
		})
	}
}

// The deadline of a request's context stays on its connection after the answer was read;
// once it passes, the idle connection must still be reusable (the engine gives every
// attempt a timeout: 30 s by default, shorter than the 90 s IdleTimeout).
func TestReuseAfterEarlierRequestsDeadlinePassed(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.url, ""))
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 1, tr.idleConns())
	<-ctx.Done() // the first request's deadline passes while its connection is idle
	require.True(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
	// The socket's deadline timer is a different one from the context's: give it time to
	// fire too, so that a deadline left on the connection would fail the peek. The pass
	// does not depend on this wait; only the test's power to catch the bug does.
	time.Sleep(20 * time.Millisecond)

	_, b := do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(1), srv.conns.Load(), "the idle connection is reused")
}

// lateTimerCtx has a deadline whose own timer has not fired yet (Err is nil): the moment
// after the socket's deadline, set from the same time, fired first.
type lateTimerCtx struct {
	context.Context
	deadline time.Time
}

func (c lateTimerCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// The socket's deadline timer and the context's fire in either order; a deadline must
// read as context.DeadlineExceeded whichever comes first.
func TestDeadlineErrorWhenSocketTimerFiresFirst(t *testing.T) {
	srv, _, closed := stallServer(t)
	tr, _ := newTestTransport(t, Config{})
	ctx := lateTimerCtx{Context: context.Background(), deadline: time.Now().Add(100 * time.Millisecond)}
	_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, srv.url, "x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireClosedByClient(t, closed)
}

// A request whose context is already done is not written, even on an idle connection
// (no dial would happen for it either).
func TestDoneContextSendsNothing(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, 1, tr.idleConns())
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := tr.RoundTrip(newRequest(t, ctx, http.MethodPost, srv.url, "must not arrive"))
		require.ErrorIs(t, err, context.Canceled)
	}
	do(t, tr, http.MethodGet, srv.url, "") // the server has read everything sent before
	require.Equal(t, int64(2), srv.reqs.Load(), "the server saw requests whose context was done")
}

// A method that is not a token is refused, as net/http's Transport refuses it: written
// as is, it would smuggle a second request into the request line.
func TestInvalidMethodSendsNothing(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	body := &trackedBody{Reader: strings.NewReader("")}
	req, err := http.NewRequest(http.MethodGet, srv.url, body)
	require.NoError(t, err)
	req.Method = "GET / HTTP/1.1\r\nHost: x\r\nX-Injected: 1\r\n\r\nGET"
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.ErrorContains(t, err, "invalid method")
	require.True(t, body.closed.Load())

	_, b := do(t, tr, http.MethodGet, srv.url, "")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(1), srv.reqs.Load(), "the server saw the refused request")
}

// Trailers are validated like headers (net/http's Transport refuses them; written, a
// CR/LF would only become a space, but the request is not the one asked for).
func TestInvalidTrailerSendsNothing(t *testing.T) {
	srv := newRawServer(t, answerAll(okAnswer))
	tr, _ := newTestTransport(t, Config{})
	req, err := http.NewRequest(http.MethodPost, srv.url, io.NopCloser(strings.NewReader("chunked")))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Trailer": {"a\r\nX-Injected: 1"}}
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.ErrorContains(t, err, "invalid")
	require.Equal(t, int64(0), srv.conns.Load())
}

// A deadline or a cancellation while the body is read reads as such, as RoundTrip's
// errors do (the engine tells a timeout from a failed read).
func TestBodyReadErrorsWrapContext(t *testing.T) {
	srv := newRawServer(t, func(c *rawConn) {
		if _, err := c.readRequest(); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello") // the rest never comes
		_ = c.waitClosed()
	})
	tr, _ := newTestTransport(t, Config{})
	for name, want := range map[string]error{"deadline": context.DeadlineExceeded, "cancel": context.Canceled} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.url, ""))
		require.NoError(t, err)
		if want == context.Canceled {
			cancel()
		}
		_, err = io.ReadAll(resp.Body)
		require.ErrorIs(t, err, want, name)
		require.NoError(t, resp.Body.Close())
		cancel()
	}
	require.Equal(t, 0, tr.idleConns())
}
