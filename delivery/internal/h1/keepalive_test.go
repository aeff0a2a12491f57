package h1

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServerKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		header string
		keep   time.Duration
		ok     bool
	}{
		{"", 0, true},
		{"timeout=5", 4 * time.Second, true},
		{"timeout=5, max=1000", 4 * time.Second, true},
		{"max=1000, Timeout = 3", 2 * time.Second, true},
		{"max=1000", 0, true},
		{"timeout=abc", 0, true},
		{"timeout=-1", 0, true},
		{"timeout=1", 0, false},
		{"timeout=0", -time.Second, false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Keep-Alive", tc.header)
		}
		keep, ok := serverKeepAlive(h)
		require.Equal(t, tc.ok, ok, tc.header)
		if ok {
			require.Equal(t, tc.keep, keep, tc.header)
		}
	}
}

// A server that announces Keep-Alive: timeout=2 (the compatibility suite's Node hosts
// do; Node's default is 5) closes the connection after 2 s idle: a request sent just
// then fails. The connection is reused for 1 s, then a new one is dialled.
func TestServerKeepAliveTimeoutHonoured(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=2\r\nContent-Length: 2\r\n\r\nok"
	srv := newRawServer(t, answerAll(answer))
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	tr, _ := newTestTransport(t, Config{Now: clock.Now, IdleTimeout: time.Hour})

	_, b := do(t, tr, http.MethodPost, srv.url, "one")
	require.Equal(t, "ok", b)
	clock.advance(time.Second) // at the margin: still reused
	_, b = do(t, tr, http.MethodPost, srv.url, "two")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(1), srv.conns.Load())

	clock.advance(time.Second + time.Millisecond) // past the server's timeout less the margin
	_, b = do(t, tr, http.MethodPost, srv.url, "three")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(2), srv.conns.Load(), "a new connection, not one the server may be closing")
}

// A server that keeps a connection for 1 s or less leaves no time to reuse it safely.
func TestServerKeepAliveTooShortIsNotPooled(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 2\r\n\r\nok"
	srv := newRawServer(t, answerAll(answer))
	tr, _ := newTestTransport(t, Config{})
	_, b := do(t, tr, http.MethodPost, srv.url, "one")
	require.Equal(t, "ok", b)
	require.Equal(t, 0, tr.idleConns())
	_, b = do(t, tr, http.MethodPost, srv.url, "two")
	require.Equal(t, "ok", b)
	require.Equal(t, int64(2), srv.conns.Load())
}
