package replica

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each request goes to the leader of its own shard: served here for a shard this
// replica leads (unbuffered), forwarded for the others, and a request whose shard
// depends on its body is routed once the body is read.
func TestRoutesEachShardToItsLeader(t *testing.T) {
	leaders := map[int]string{}
	for shard, name := range map[int]string{0: "zero", 2: "two"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, name+":"+string(b))
		}))
		t.Cleanup(srv.Close)
		leaders[shard] = srv.URL
	}
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "local:"+string(b))
	})
	f := newForwarder(t, Config{Self: "r-me",
		Shard: func(r *http.Request, body []byte) (int, error) {
			switch {
			case r.Header.Get("X-Shard") == "1":
				return 1, nil
			case r.Header.Get("X-Shard") == "2":
				return 2, nil
			case r.URL.Path == "/by-body" && body == nil:
				return 0, ErrNeedBody
			case r.URL.Path == "/by-body":
				return map[bool]int{true: 2, false: 0}[strings.HasPrefix(string(body), "two")], nil
			}
			return 0, nil
		},
		Leader: func(_ context.Context, shard int) (string, error) { return leaders[shard], nil },
		Local: func(shard int) http.Handler {
			if shard == 1 {
				return local
			}
			return nil
		},
	})
	ask := func(path, shard, body string) string {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if shard != "" {
			req.Header.Set("X-Shard", shard)
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String()
	}
	require.Equal(t, "zero:a", ask("/x", "", "a"))
	require.Equal(t, "local:b", ask("/x", "1", "b"))
	require.Equal(t, "two:c", ask("/x", "2", "c"))
	require.Equal(t, "two:two-d", ask("/by-body", "", "two-d"))
	require.Equal(t, "zero:e", ask("/by-body", "", "e"))

	// Forwarded here as shard 2's leader, which this replica is not: refused unread.
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("f"))
	req.Header.Set("X-Shard", "2")
	req.Header.Set(ForwardedHeader, "r-other")
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, req)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "r-me", rec.Header().Get(NotLeaderHeader))
}
