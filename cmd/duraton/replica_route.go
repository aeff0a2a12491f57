package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/console"
	"github.com/duraton/duraton/server/replica"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// router tells which shard a request belongs to (server/replica's Config.Shard): the
// shard of its project (pg.ShardOf), the project being the one its API token belongs
// to. The token records live in their project's shard, so an unknown token is looked
// up in the shard its embedded user id names (tokens made by Duraton carry their
// project there) and then in every other. Found tokens are remembered for a minute,
// unknown ones for five seconds (at most 10,000 of each); a request with no token or an
// unknown one goes to project default's shard, whose server answers it (401 for a bad
// token, with its failed-login limit).
//
// The console has no token after its login: the login form's token routes the login,
// and a cookie the console sets then (console.ProjectCookie, a hint only: the session
// cookie is what authenticates) routes the pages after it. A console session lives in
// the memory of the replica that leads its project's shard: when the shard moves, the
// visitor logs in again.
type router struct {
	eng *pg.Engine
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	known   map[string]routeEntry // token hash → project
	unknown map[string]time.Time  // token hash → looked up again after
}

type routeEntry struct {
	project string
	until   time.Time
}

const (
	routeKnownTTL   = time.Minute
	routeUnknownTTL = 5 * time.Second
	routeCacheMax   = 10_000
)

func newRouter(eng *pg.Engine, log *slog.Logger) *router {
	return &router{eng: eng, log: log, now: time.Now, known: map[string]routeEntry{}, unknown: map[string]time.Time{}}
}

// shard implements replica.Config.Shard.
func (rt *router) shard(r *http.Request, body []byte) (int, error) {
	n := rt.eng.ShardCount()
	if n == 1 {
		return 0, nil
	}
	if token, ok := server.BearerToken(r.Header.Get("Authorization")); ok {
		project, err := rt.project(token)
		if err != nil {
			return 0, err
		}
		return pg.ShardOf(project, n), nil
	}
	if r.URL.Path == "/console/login" && r.Method == http.MethodPost {
		if body == nil {
			return 0, replica.ErrNeedBody
		}
		form, err := url.ParseQuery(string(body))
		token := strings.TrimSpace(form.Get("token")) // as the console reads it
		if err != nil || token == "" {
			return pg.ShardOf(devProject, n), nil // the console answers the bad form
		}
		project, err := rt.project(token)
		if err != nil {
			return 0, err
		}
		return pg.ShardOf(project, n), nil
	}
	if strings.HasPrefix(r.URL.Path, "/console") {
		if c, err := r.Cookie(console.ProjectCookie); err == nil && c.Value != "" {
			return pg.ShardOf(c.Value, n), nil
		}
	}
	return pg.ShardOf(devProject, n), nil
}

// project is the project token belongs to; project default for an unknown token.
func (rt *router) project(token string) (string, error) {
	project, found, err := rt.find(token)
	if err != nil {
		return "", fmt.Errorf("looking up the API token's project failed: %w; retry", err)
	}
	if !found {
		return devProject, nil
	}
	return project, nil
}

// find looks token up, through the caches.
func (rt *router) find(token string) (project string, found bool, err error) {
	hash := server.TokenHash(token)
	now := rt.now()
	rt.mu.Lock()
	e, known := rt.known[hash]
	retryAt, unknown := rt.unknown[hash]
	rt.mu.Unlock()
	switch {
	case known && now.Before(e.until):
		return e.project, true, nil
	case unknown && now.Before(retryAt):
		return "", false, nil
	}
	project, err = rt.lookup(hash, embeddedProject(token))
	if errors.Is(err, storage.ErrNotFound) {
		rt.remember(rt.unknown, hash, now.Add(routeUnknownTTL))
		return "", false, nil
	}
	if err != nil {
		rt.log.Warn("token lookup for routing failed", "err", err)
		return "", false, err
	}
	rt.mu.Lock()
	if len(rt.known) >= routeCacheMax {
		clear(rt.known)
	}
	rt.known[hash] = routeEntry{project: project, until: now.Add(routeKnownTTL)}
	rt.mu.Unlock()
	return project, true, nil
}

func (rt *router) remember(m map[string]time.Time, hash string, until time.Time) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(m) >= routeCacheMax {
		clear(m)
	}
	m[hash] = until
}

// lookup finds the token's record: in hint's shard first, then in the others.
func (rt *router) lookup(hash, hint string) (string, error) {
	first := -1
	if hint != "" {
		first = pg.ShardOf(hint, rt.eng.ShardCount())
		if p, err := projectIn(rt.eng, first, hash); !errors.Is(err, storage.ErrNotFound) {
			return p, err
		}
	}
	for i := range rt.eng.ShardCount() {
		if i == first {
			continue
		}
		if p, err := projectIn(rt.eng, i, hash); !errors.Is(err, storage.ErrNotFound) {
			return p, err
		}
	}
	return "", storage.ErrNotFound
}

func projectIn(eng *pg.Engine, shard int, hash string) (string, error) {
	s, err := eng.Shard(shard)
	if err != nil {
		return "", err
	}
	return storage.TokenProjectIn(s, hash)
}

// authorized implements replica.Config.Authorized: the token is known in some shard.
func (rt *router) authorized(r *http.Request) bool {
	token, ok := server.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	_, found, err := rt.find(token)
	return err == nil && found
}

// embeddedProject is the user id a token made by Duraton carries (newToken): base64 of
// {"UserID": project, ...}; "" for any other token.
func embeddedProject(token string) string {
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return ""
	}
	var t struct{ UserID string }
	if json.Unmarshal(raw, &t) != nil {
		return ""
	}
	return t.UserID
}
