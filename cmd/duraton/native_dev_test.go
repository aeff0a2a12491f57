package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// plainCall sends a request with the given Authorization header ("" for none) and
// returns the status and body.
func plainCall(t *testing.T, client *http.Client, method, url, auth, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(raw)
}

// TestNativeTokenlessDevOnly: `duraton dev` answers the native routes without a token
// (the documentation's curl "$DURATON_URL/flow-state" works as written) but still checks
// a token that is sent, and keeps /v2 behind its token; `duraton serve` answers 401.
func TestNativeTokenlessDevOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	client := newAPIClient(t, 10*time.Second)
	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/flow-state", ""},
		{http.MethodGet, "/apps", ""},
		{http.MethodGet, "/workflows", ""},
		{http.MethodGet, "/runs", ""},
		{http.MethodGet, "/runs/stats", ""},
		{http.MethodGet, "/events", ""},
		{http.MethodPost, "/events", `{"name":"nobody.listens","data":1}`},
		{http.MethodPut, "/apps/empty", `{"workflows":[]}`},
	}

	t.Run("Dev", func(t *testing.T) {
		t.Parallel()
		p := startDuraton(t, t.TempDir())
		for _, r := range routes {
			status, body := plainCall(t, client, r.method, p.URL+r.path, "", r.body)
			require.Equal(t, http.StatusOK, status, "%s %s without a token: %s", r.method, r.path, body)
		}
		// What was done without a token is the dev project's: the token sees it.
		status, body := nativeCall(t, client, p, http.MethodGet, "/events?name=nobody.listens", "")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(body), "nobody.listens")
		// A wrong token is refused, not ignored.
		status, body2 := plainCall(t, client, http.MethodGet, p.URL+"/flow-state", "Bearer wrong", "")
		require.Equal(t, http.StatusUnauthorized, status, body2)
		// The Upstash API keeps its token.
		status, _ = plainCall(t, client, http.MethodGet, p.URL+"/v2/queues", "", "")
		require.Equal(t, http.StatusUnauthorized, status)
	})

	t.Run("Serve", func(t *testing.T) {
		t.Parallel()
		s := startServe(t, t.TempDir())
		for _, r := range routes {
			status, body := plainCall(t, client, r.method, s.URL+r.path, "", r.body)
			require.Equal(t, http.StatusUnauthorized, status, "%s %s without a token: %s", r.method, r.path, body)
		}
	})
}
