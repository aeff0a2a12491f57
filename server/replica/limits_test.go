package replica

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stall opens a connection to srv, sends the head of a POST to path declaring length
// bytes and then sent bytes of it, and leaves the rest unsent.
func stall(t *testing.T, srv *httptest.Server, path string, length, sent int) net.Conn {
	t.Helper()
	return stallAs(t, srv, "good", path, length, sent)
}

// stallAs is stall with "Authorization: Bearer <token>".
func stallAs(t *testing.T, srv *httptest.Server, token, path string, length, sent int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, token, length, strings.Repeat("x", sent))
	require.NoError(t, err)
	return conn
}

// answer reads the status line and the body of the answer on conn.
func answer(t *testing.T, conn net.Conn, within time.Duration) (int, string) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(within)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFollowerBodyLimits: a declared length over the route's limit is refused unread;
// a body that stalls is cut off after BodyTimeout; bodies held at once share a budget,
// given back when each request ends; requests without a valid token have the small
// limit everywhere and a quarter of the budget of their own.
func TestFollowerBodyLimits(t *testing.T) {
	leader := newRecordingLeader(t)
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{addr: leader.URL}).get,
		MaxBodyBytes: 64 << 10, MaxMessageBytes: 8 << 10, BodyTimeout: 300 * time.Millisecond, MaxBufferedBytes: 100 << 10,
		Authorized: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer good" }})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	status, body := answer(t, stall(t, srv, "/v2/publish/http://x.test", 9<<10, 0), 5*time.Second)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.Contains(t, body, "8192 bytes this route takes")
	status, body = answer(t, stall(t, srv, "/v2/batch", 65<<10, 0), 5*time.Second)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)

	// Two stalled batches would hold 120 KiB of the 75 KiB that token holders have: the
	// second is refused.
	first := stall(t, srv, "/v2/batch", 60<<10, 1<<10)
	require.Eventually(t, func() bool { return f.buffered.inUse() == 60<<10 }, 5*time.Second, 5*time.Millisecond)
	status, body = answer(t, stall(t, srv, "/v2/batch", 60<<10, 1<<10), 5*time.Second)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, "holding 76800 bytes of request bodies with a valid token")

	// Without a valid token: the small limit on every route, and a quarter of the budget
	// of its own (25 KiB), which token holders' bodies do not count against.
	status, body = answer(t, stallAs(t, srv, "bad", "/v2/batch", 9<<10, 0), 5*time.Second)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	var anon []net.Conn
	for range 3 {
		anon = append(anon, stallAs(t, srv, "bad", "/v2/publish/http://x.test", 8<<10, 1<<10))
	}
	require.Eventually(t, func() bool { return f.anon.inUse() == 24<<10 }, 5*time.Second, 5*time.Millisecond)
	status, body = answer(t, stallAs(t, srv, "bad", "/v2/publish/http://x.test", 8<<10, 1<<10), 5*time.Second)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, "without a valid token")
	for _, c := range anon {
		status, _ = answer(t, c, 5*time.Second)
		require.Equal(t, http.StatusRequestTimeout, status)
	}

	start := time.Now()
	status, body = answer(t, first, 5*time.Second)
	require.Equal(t, http.StatusRequestTimeout, status, body)
	require.Less(t, time.Since(start), 3*time.Second, "cut off after the body timeout")
	require.Eventually(t, func() bool { return f.buffered.inUse() == 0 && f.anon.inUse() == 0 }, 5*time.Second, 5*time.Millisecond, "the budget is given back")
	require.Empty(t, leader.bodies(), "nothing incomplete was forwarded")

	// A whole body within the limits is forwarded as before.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v2/batch", strings.NewReader(`[{"destination": "http://x.test"}]`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer good")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, []string{`[{"destination": "http://x.test"}]`}, leader.bodies())
	require.Zero(t, f.buffered.inUse())
}

// TestFollowerWorkflowBodyLimit: a workflow message (a trigger, or a publish naming a run)
// may be as large as the leader's workflow limit, with a valid token only; other messages
// keep the message limit.
func TestFollowerWorkflowBodyLimit(t *testing.T) {
	leader := newRecordingLeader(t)
	f := newForwarder(t, Config{Self: "r-me", Leader: (&leaderStub{addr: leader.URL}).get,
		MaxBodyBytes: 64 << 10, MaxMessageBytes: 8 << 10, MaxWorkflowMessageBytes: 32 << 10,
		Authorized: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer good" }})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	send := func(token, path string, n int, header ...string) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(strings.Repeat("x", n)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, send("good", "/v2/trigger/http://x.test", 20<<10))
	require.Equal(t, http.StatusCreated, send("good", "/v2/publish/http://x.test", 20<<10, "Upstash-Workflow-RunId", "wfr_a"))
	require.Equal(t, http.StatusRequestEntityTooLarge, send("good", "/v2/publish/http://x.test", 20<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, send("good", "/v2/trigger/http://x.test", 33<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, send("bad", "/v2/trigger/http://x.test", 20<<10), "no valid token: the message limit")
}
