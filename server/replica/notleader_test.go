package replica

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForwardWaitsForALeaderStillStarting: a replica that has just taken the lease
// (the lease names it, so followers forward to it) but has not started its engine yet
// answers a forwarded request "not leading"; the follower that forwarded it waits and
// sends it again, so the client sees the new leader's answer, not a 503. A takeover
// takes this path every time: between the lease and the engine start.
func TestForwardWaitsForALeaderStillStarting(t *testing.T) {
	var served atomic.Int32
	var local atomic.Pointer[http.Handler]
	starting, err := New(Config{
		Self:   "r-new",
		Leader: func(context.Context, int) (string, error) { return "", nil }, // it holds the lease itself
		Local: func(int) http.Handler {
			if h := local.Load(); h != nil {
				return *h
			}
			return nil
		},
	})
	require.NoError(t, err)
	newLeader := httptest.NewServer(starting)
	t.Cleanup(newLeader.Close)

	follower, err := New(Config{
		Self:   "r-follower",
		Leader: func(context.Context, int) (string, error) { return newLeader.URL, nil },
	})
	require.NoError(t, err)
	front := httptest.NewServer(follower)
	t.Cleanup(front.Close)

	// The engine starts 300 ms after the request arrives.
	go func() {
		time.Sleep(300 * time.Millisecond)
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(append([]byte("led: "), b...))
		})
		local.Store(&h)
	}()
	res, err := http.Post(front.URL+"/v2/publish/x", "text/plain", strings.NewReader("hello"))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", body)
	require.Equal(t, "led: hello", string(body))
	require.Equal(t, int32(1), served.Load(), "served once, by the new leader")
}

// TestForwardedToAFollowerIsRefused: a forwarded request that reaches a replica which
// neither leads nor is starting to is answered 503 (no forwarding loops) once the
// forwarding follower's wait is over.
func TestForwardedToAFollowerIsRefused(t *testing.T) {
	other, err := New(Config{Self: "r-other", Leader: func(context.Context, int) (string, error) { return "http://127.0.0.1:1", nil }})
	require.NoError(t, err)
	otherSrv := httptest.NewServer(other)
	t.Cleanup(otherSrv.Close)
	follower, err := New(Config{Self: "r-f", WaitForLeader: 300 * time.Millisecond,
		Leader: func(context.Context, int) (string, error) { return otherSrv.URL, nil }})
	require.NoError(t, err)
	front := httptest.NewServer(follower)
	t.Cleanup(front.Close)

	began := time.Now()
	res, err := http.Post(front.URL+"/v2/publish/x", "text/plain", strings.NewReader("hello"))
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "%s", body)
	require.Contains(t, string(body), `"error"`)
	require.Less(t, time.Since(began), 5*time.Second)
}
