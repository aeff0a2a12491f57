package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// Dev mode's guards. Its token and signing keys are public and its native API needs no
// token, so what keeps other sites out is the browser: a page of another origin may not
// read answers, and may send only "simple" requests (GET, HEAD, or a POST of a form or
// text/plain) without asking first, which this server never allows. Two holes remain,
// closed here: a name of the attacker's re-pointed at 127.0.0.1 (DNS rebinding) makes its
// page same-origin with this server, and a simple POST needs no permission.

// localHostOnly refuses (403) a request whose Host is not this machine's: localhost, a
// name under .localhost, a loopback address, or listenHost (the host of the listen
// address; when that is all interfaces, any IP address). An IP address cannot be
// re-pointed, so only names are at risk.
func localHostOnly(listenHost string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !localHost(c.Request().Host, listenHost) {
				return &apiError{status: http.StatusForbidden, msg: "dev mode answers only requests addressed to this machine (localhost, a loopback address or the --addr host), " +
					"not to host \"" + hostOnly(c.Request().Host) + "\": a page of another site may have pointed that name here (DNS rebinding)"}
			}
			return next(c)
		}
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func localHost(hostport, listenHost string) bool {
	h := strings.ToLower(strings.TrimSuffix(hostOnly(hostport), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	listen := strings.ToLower(strings.Trim(listenHost, "[]"))
	if h != "" && h == listen {
		return true
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	any := listen == "" || net.ParseIP(listen) != nil && net.ParseIP(listen).IsUnspecified()
	return ip.IsLoopback() || any
}

// tokenlessWrite checks a request the dev project runs without a token: one that
// changes something must be JSON (which another site's page cannot send without this
// server's permission) and come from no page or a page of this server (Origin).
func tokenlessWrite(c echo.Context) error {
	r := c.Request()
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if origin := r.Header.Get("Origin"); origin != "" && !sameOriginAs(origin, r.Host) {
		return &apiError{status: http.StatusForbidden, msg: "a request without a token from a page of another site (Origin " + origin + ") is refused; send the token"}
	}
	// A body, or any declared type (a form's, even empty), must be JSON; a POST without
	// either (a cancel) is judged by its Origin alone, which a browser always sends
	// across sites.
	ct := r.Header.Get("Content-Type")
	if r.ContentLength != 0 || ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &apiError{status: http.StatusUnsupportedMediaType, msg: "a request without a token must send Content-Type: application/json (or send the token)"}
		}
	}
	return nil
}

func sameOriginAs(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, host)
}
