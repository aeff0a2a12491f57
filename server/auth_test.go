package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

// tokenTable is a TokenResolver over a map that counts its lookups.
type tokenTable struct {
	mu      sync.Mutex
	tokens  map[string]string
	lookups int
}

func (tt *tokenTable) ProjectForToken(_ context.Context, hash string) (string, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.lookups++
	if p, ok := tt.tokens[hash]; ok {
		return p, nil
	}
	return "", delivery.ErrNotFound
}

// TestRevokedTokenRefusedAfterTTL: a valid token is cached for the TTL only, so a token
// revoked in the store (by another process on a shared database) stops working.
func TestRevokedTokenRefusedAfterTTL(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	hash := TokenHash("leaked-token-0123456789abcdef0123456789")
	table := &tokenTable{tokens: map[string]string{hash: "acme"}}
	a := &authenticator{tokens: table, known: map[string]knownToken{}, ttl: 5 * time.Second, now: func() time.Time { return now }}

	p, ok := a.project(t.Context(), hash)
	require.True(t, ok)
	require.Equal(t, "acme", p)
	_, ok = a.project(t.Context(), hash)
	require.True(t, ok)
	require.Equal(t, 1, table.lookups, "cached")

	table.mu.Lock()
	delete(table.tokens, hash) // duraton tokens revoke
	table.mu.Unlock()
	now = now.Add(4 * time.Second)
	_, ok = a.project(t.Context(), hash)
	require.True(t, ok, "still cached within the TTL")
	now = now.Add(time.Second)
	_, ok = a.project(t.Context(), hash)
	require.False(t, ok, "refused once the TTL passed")
	require.Empty(t, a.known, "and forgotten")
}
