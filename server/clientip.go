package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/server/replica"
)

// clientIP is the address rate limits and the failed-auth limiter count a request
// against: the connection's peer, or, for a request a follower replica forwarded (it
// proves it with the shared secret), the address that follower appended to
// X-Forwarded-For. Without this, every client behind one follower would share one
// budget, and one client failing to authenticate would lock the others out.
func clientIP(secret string) echo.IPExtractor {
	direct := echo.ExtractIPDirect()
	if secret == "" {
		return direct // never trust X-Forwarded-For from the public
	}
	want := []byte(secret)
	return func(r *http.Request) string {
		got := r.Header.Get(replica.SecretHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			return direct(r)
		}
		xff := r.Header.Values("X-Forwarded-For")
		if len(xff) == 0 {
			return direct(r)
		}
		last := xff[len(xff)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		if ip := net.ParseIP(strings.TrimSpace(last)); ip != nil {
			return ip.String()
		}
		return direct(r)
	}
}
