package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// TokenHash is how tokens are stored: only their SHA-256, never the token itself.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenResolver finds the project a token hash belongs to (delivery.ErrNotFound if none).
type TokenResolver interface {
	ProjectForToken(ctx context.Context, tokenHash string) (string, error)
}

// authenticator checks the bearer token of every /v2 request and puts the caller's
// project on the request. Tokens travel only in the Authorization header: a token in
// the query string is refused, so it cannot leak into access logs.
type authenticator struct {
	tokens TokenResolver
	limit  *failedAuthLimiter
	mu     sync.RWMutex
	known  map[string]string // token hash → project; tokens are never reassigned
}

const projectKey = "duraton.project"

// projectOf returns the authenticated caller's project.
func projectOf(c echo.Context) string {
	p, _ := c.Get(projectKey).(string)
	return p
}

func unauthorized(msg string) error {
	return &apiError{status: http.StatusUnauthorized, msg: msg}
}

func (a *authenticator) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// The query of a publish, enqueue or trigger belongs to the destination URL.
		if !hasDestinationInPath(c.Request().URL.Path) && c.QueryParam("qstash_token") != "" {
			return unauthorized("tokens are accepted only in the Authorization header")
		}
		token, ok := bearerToken(c.Request().Header.Get("Authorization"))
		if !ok {
			return a.failed(c, "missing bearer token: send Authorization: Bearer <QSTASH_TOKEN>")
		}
		project, ok := a.project(c.Request().Context(), token)
		if !ok {
			return a.failed(c, "invalid token")
		}
		// A valid token is never refused: the failure limit is per address, and others
		// behind the same address (NAT, proxy) may be the ones failing.
		c.Set(projectKey, project)
		return next(c)
	}
}

// tokenless is middleware when project is empty; otherwise a request without an
// Authorization header runs as project (dev mode's native API), and one with a header is
// authenticated as usual (a wrong token is still a 401).
func (a *authenticator) tokenless(project string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		authed := a.middleware(next)
		if project == "" {
			return authed
		}
		return func(c echo.Context) error {
			if c.Request().Header.Get("Authorization") != "" || c.QueryParam("qstash_token") != "" {
				return authed(c)
			}
			if err := tokenlessWrite(c); err != nil {
				return err
			}
			c.Set(projectKey, project)
			return next(c)
		}
	}
}

// failed answers a request that did not authenticate: 401, or 429 once its address used
// up its failures.
func (a *authenticator) failed(c echo.Context, msg string) error {
	addr := c.RealIP()
	if blocked, wait := a.limit.blocked(addr); blocked {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		return &apiError{status: http.StatusTooManyRequests, msg: "too many failed authentication attempts from this address; retry later"}
	}
	a.limit.fail(addr)
	return unauthorized(msg)
}

// project finds the project of a token. Hashing first makes the lookup independent of
// the token's bytes, so comparing hashes by map lookup leaks nothing useful about it.
func (a *authenticator) project(ctx context.Context, token string) (string, bool) {
	hash := TokenHash(token)
	a.mu.RLock()
	project, ok := a.known[hash]
	a.mu.RUnlock()
	if ok {
		return project, true
	}
	p, err := a.tokens.ProjectForToken(ctx, hash)
	if err != nil {
		return "", false
	}
	a.mu.Lock()
	if len(a.known) >= maxKnownTokens {
		clear(a.known)
	}
	a.known[hash] = p
	a.mu.Unlock()
	return p, true
}

// maxKnownTokens bounds the cache of valid tokens (only valid ones enter it).
const maxKnownTokens = 10_000

// bearerToken reads "Bearer <token>"; the scheme is case-insensitive (RFC 7235 §2.1).
// BearerToken is the token of an Authorization header value ("Bearer <token>", the
// scheme in any case); false when it holds none.
func BearerToken(header string) (string, bool) { return bearerToken(header) }

func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func hasDestinationInPath(path string) bool {
	for _, p := range []string{"/v2/publish/", "/v2/enqueue/", "/v2/trigger/"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
