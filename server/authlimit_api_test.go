package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFailedAuthThrottles: once an address used up its failures, its requests are
// refused before their token is looked up, so it cannot tell a valid token it never
// used from a wrong one (no oracle: guessing is held to the budget); a token that
// address already worked with is still accepted, and other addresses are not affected.
func TestFailedAuthThrottles(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{config: func(c *Config) { c.FailedAuthBurst = 3 }})
	other := env.withProject(t, "other", "other-token-0123456789abcdef0123456789")
	require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/queues", nil).Status, "a caller already working")
	bad := *env
	bad.Token = "not-a-valid-token-0123456789abcdefghij"
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, bad.call(t, http.MethodGet, "/v2/queues", nil).Status)
	}
	r := bad.call(t, http.MethodGet, "/v2/queues", nil)
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	require.NotEmpty(t, r.Header.Get("Retry-After"))
	r = other.call(t, http.MethodGet, "/v2/queues", nil)
	require.Equal(t, http.StatusTooManyRequests, r.Status, "a valid token this address never used answers like a wrong one: %s", r.Body)
	require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/queues", nil).Status, "the working caller is not locked out")
	require.Equal(t, http.StatusTooManyRequests, bad.call(t, http.MethodGet, "/v2/queues", nil).Status, "still blocked for bad tokens")
}
