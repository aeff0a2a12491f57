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

// serveInProcess runs `duraton serve args...` in this process until the test ends and
// returns its base URL once /readyz answers 200.
func serveInProcess(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeLoopbackAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	all := append([]string{"serve", "--addr", addr, "--data", t.TempDir(), "--log-level", "error"}, args...)
	go func() { done <- run(ctx, all, io.Discard, io.Discard, envOf(nil)) }()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-done, "serve exit code")
	})
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		require.True(t, time.Now().Before(deadline), "serve did not become ready: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestServeMetricsToken: `serve --metrics-token` guards /metrics with its own token;
// the probes stay open and say nothing about the data.
func TestServeMetricsToken(t *testing.T) {
	t.Parallel()
	base := serveInProcess(t, "--token", "api-token-0123456789abcdefghijklmnop", "--metrics-token", "scrape-token-0123456789abcdefghijklm")

	status, body := get(t, base+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, status, body)
	status, body = get(t, base+"/metrics", "Bearer api-token-0123456789abcdefghijklmnop")
	require.Equal(t, http.StatusUnauthorized, status, "the API token does not open /metrics: %s", body)
	status, body = get(t, base+"/metrics", "Bearer scrape-token-0123456789abcdefghijklm")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "duraton_messages_published_total")
	require.Contains(t, body, "duraton_store_size_bytes")

	status, body = get(t, base+"/v2/keys", "Bearer scrape-token-0123456789abcdefghijklm")
	require.Equal(t, http.StatusUnauthorized, status, "the metrics token opens nothing else: %s", body)

	for _, probe := range []string{"/healthz", "/readyz"} {
		status, body = get(t, base+probe, "")
		require.Equal(t, http.StatusOK, status, probe)
		require.True(t, strings.HasPrefix(body, `{"status":`), body)
	}
}
