package server

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/server/replica"
)

func TestClientIPTrustsOnlyReplicas(t *testing.T) {
	t.Parallel()
	req := func(secret, xff string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.9:4444" // the follower (or an attacker)
		if secret != "" {
			r.Header.Set(replica.SecretHeader, secret)
		}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		return clientIP("s3cret")(r)
	}
	require.Equal(t, "203.0.113.5", req("s3cret", "198.51.100.1, 203.0.113.5"), "the follower appended the last entry")
	require.Equal(t, "10.0.0.9", req("", "203.0.113.5"), "no secret: the peer")
	require.Equal(t, "10.0.0.9", req("wrong", "203.0.113.5"), "wrong secret: the peer")
	require.Equal(t, "10.0.0.9", req("s3cret", "not-an-ip"), "malformed: the peer")
	require.Equal(t, "10.0.0.9", req("s3cret", ""), "no header: the peer")

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.9:4444"
	r.Header.Set(replica.SecretHeader, "")
	r.Header.Set("X-Forwarded-For", "203.0.113.5")
	require.Equal(t, "10.0.0.9", clientIP("")(r), "no secret configured: never trusted")
}
