package main

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
)

// followerTokens tells a follower replica whether a request carries a valid API token,
// from the shared database, so that callers without one get the small body limit
// (server/replica). Valid tokens are remembered for a minute (at most 10,000); an
// invalid one is looked up each time, as the leader would look it up after forwarding.
type followerTokens struct {
	engine kv.Engine
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	valid map[string]time.Time // token hash → remembered until
}

const (
	followerTokenTTL  = time.Minute
	followerTokensMax = 10_000
)

func newFollowerTokens(e kv.Engine, log *slog.Logger) *followerTokens {
	return &followerTokens{engine: e, log: log, now: time.Now, valid: map[string]time.Time{}}
}

// authorized implements replica.Config.Authorized.
func (f *followerTokens) authorized(r *http.Request) bool {
	token, ok := server.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	hash := server.TokenHash(token)
	now := f.now()
	f.mu.Lock()
	until, seen := f.valid[hash]
	f.mu.Unlock()
	if seen && now.Before(until) {
		return true
	}
	_, err := storage.TokenProjectIn(f.engine, hash)
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			f.log.Warn("follower token lookup failed", "err", err)
		}
		return false
	}
	f.mu.Lock()
	if len(f.valid) >= followerTokensMax {
		clear(f.valid)
	}
	f.valid[hash] = now.Add(followerTokenTTL)
	f.mu.Unlock()
	return true
}
