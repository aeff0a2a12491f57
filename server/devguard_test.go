package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevRefusesForeignHostsAndCrossSiteWrites: in dev mode a request addressed to a
// name of another site (DNS rebinding) is refused whatever its route, token or not; a
// token-free write must be JSON and come from no page or this server's own.
func TestDevRefusesForeignHostsAndCrossSiteWrites(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{config: func(c *Config) {
		c.TokenlessProject, c.LocalHostsOnly, c.ListenHost = testProject, true, "127.0.0.1"
	}})
	send := func(method, path, host, body string, header ...string) apiResponse {
		t.Helper()
		req := env.request(t, method, path, []byte(body), header...)
		if host != "" {
			req.Host = host
		}
		return env.send(t, req)
	}
	tokenless := func(method, path, host, body string, header ...string) apiResponse {
		t.Helper()
		req := env.request(t, method, path, []byte(body), header...)
		req.Header.Del("Authorization")
		if host != "" {
			req.Host = host
		}
		return env.send(t, req)
	}

	// The refusal of a foreign Host holds on every route (the document says so once).
	raw := func(method, path, host, auth, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, env.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := env.client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"rebind.attacker.example:18080", "attacker.example", "127.0.0.1.nip.io:8080", "10.1.2.3:8080"} {
		status, body := raw(http.MethodGet, "/v2/queues", host, "Bearer "+env.Token, "")
		require.Equal(t, http.StatusForbidden, status, "%s: %s", host, body)
		require.Contains(t, body, "DNS rebinding")
		status, body = raw(http.MethodPost, "/events", host, "", `{"name": "x"}`)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", host, body)
		status, _ = raw(http.MethodGet, "/console/", host, "", "")
		require.Equal(t, http.StatusForbidden, status, "the console at %s", host)
	}
	for _, host := range []string{"localhost:8080", "LOCALHOST", "app.localhost:1", "127.0.0.1:9", "[::1]:8080", "127.0.0.2"} {
		r := send(http.MethodGet, "/v2/queues", host, "")
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", host, r.Body)
	}
	require.True(t, localHost("10.1.2.3:8080", "0.0.0.0"), "listening on all interfaces: any address")
	require.True(t, localHost("dev.example:8080", "dev.example"), "the --addr host")
	require.False(t, localHost("dev.example:8080", ""))

	// Token-free writes: JSON only, from no page or this server's own.
	r := tokenless(http.MethodPost, "/events", "", `{"name": "x"}`, "Content-Type", "text/plain")
	require.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/events", "", `{"name": "x"}`)
	require.Equal(t, http.StatusUnsupportedMediaType, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/runs/wfr_nope/cancel", "", "", "Content-Type", "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusUnsupportedMediaType, r.Status, "an empty form is still a form: %s", r.Body)
	r = tokenless(http.MethodPost, "/runs/wfr_nope/cancel", "", "", "Origin", "http://attacker.example")
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/runs/wfr_nope/cancel", "", "")
	require.Equal(t, http.StatusNotFound, r.Status, "a bare POST of no page (curl, the SDKs) passes: %s", r.Body)
	r = tokenless(http.MethodPost, "/events", "", `{"name": "x"}`, "Content-Type", "application/json", "Origin", "http://attacker.example")
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/events", "", `{"name": "x"}`, "Content-Type", "application/json", "Origin", "null")
	require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/events", "", `{"name": "x"}`, "Content-Type", "application/json; charset=utf-8", "Origin", env.URL)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = tokenless(http.MethodPost, "/events", "", `{"name": "x"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = tokenless(http.MethodGet, "/events", "", "", "Origin", "http://attacker.example")
	require.Equal(t, http.StatusOK, r.Status, "a read answers (the browser keeps it from the page)")
	// With the token, a request is judged by it.
	req := env.request(t, http.MethodPost, "/events", []byte(`{"name": "x"}`), "Content-Type", "text/plain", "Origin", "http://attacker.example")
	resp, err := env.client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
