package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/server/internal/authlimit"
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
	limit  *authlimit.Limiter
	// known caches valid tokens for ttl: a token revoked in the store (duraton tokens
	// revoke, possibly by another process on a shared database) is refused once its
	// entry expires.
	ttl   time.Duration
	now   func() time.Time
	mu    sync.RWMutex
	known map[string]knownToken // by token hash; tokens are never reassigned
}

type knownToken struct {
	project string
	until   time.Time
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
		addr, hash := c.RealIP(), ""
		if ok {
			hash = TokenHash(token)
		}
		// A client over its failure budget is refused before its token is looked up,
		// unless it is a token this client already worked with (package authlimit).
		if blocked, wait := a.limit.Blocked(addr, hash); blocked {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			return &apiError{status: http.StatusTooManyRequests, msg: "too many failed authentication attempts from this address; retry later"}
		}
		if !ok {
			a.limit.Fail(addr)
			return unauthorized("missing bearer token: send Authorization: Bearer <QSTASH_TOKEN>")
		}
		project, ok := a.project(c.Request().Context(), hash)
		if !ok {
			a.limit.Fail(addr)
			return unauthorized("invalid token")
		}
		a.limit.Succeeded(addr, hash)
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

// project finds the project of a token by its hash. Hashing first makes the lookup
// independent of the token's bytes, so comparing hashes by map lookup leaks nothing
// useful about it.
func (a *authenticator) project(ctx context.Context, hash string) (string, bool) {
	now := a.now()
	a.mu.RLock()
	k, ok := a.known[hash]
	a.mu.RUnlock()
	if ok && now.Before(k.until) {
		return k.project, true
	}
	p, err := a.tokens.ProjectForToken(ctx, hash)
	if err != nil {
		if ok {
			a.mu.Lock()
			delete(a.known, hash)
			a.mu.Unlock()
		}
		return "", false
	}
	a.mu.Lock()
	if len(a.known) >= maxKnownTokens {
		clear(a.known)
	}
	a.known[hash] = knownToken{project: p, until: now.Add(a.ttl)}
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
