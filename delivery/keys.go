package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/duraton/duraton/storage"
)

// keyCache keeps each project's current signing key in memory; it is filled from storage
// on first use and replaced on rotation.
type keyCache struct {
	store Store
	mu    sync.RWMutex
	keys  map[string]string
}

func (k *keyCache) current(project string) (string, error) {
	k.mu.RLock()
	key, ok := k.keys[project]
	k.mu.RUnlock()
	if ok {
		return key, nil
	}
	var p *storage.Project
	if err := k.store.View(func(tx *storage.Tx) error {
		var err error
		p, err = tx.Project(project)
		return err
	}); err != nil {
		return "", err
	}
	k.set(project, p.CurrentSigningKey)
	return p.CurrentSigningKey, nil
}

func (k *keyCache) set(project, key string) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]string{}
	}
	k.keys[project] = key
	k.mu.Unlock()
}

// NewSigningKey makes a signing key: "sig_" and 32 random bytes in hex.
func NewSigningKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "sig_" + hex.EncodeToString(b[:])
}

// RotateKeys makes the next key current and generates a new next key, as QStash's
// /v2/keys/rotate does. Deliveries are signed with the new current key from then on.
func (e *Engine) RotateKeys(ctx context.Context, project string) (*Project, error) {
	next := NewSigningKey()
	p, err := update(ctx, e.store, func(tx *storage.Tx) (*Project, error) {
		cur, err := tx.Project(project)
		if err != nil {
			return nil, err
		}
		rotated := *cur
		rotated.CurrentSigningKey, rotated.NextSigningKey = cur.NextSigningKey, next
		return &rotated, tx.PutProject(&rotated)
	})
	if err != nil {
		return nil, err
	}
	e.keys.set(project, p.CurrentSigningKey)
	return p, nil
}

// Project reads a project's record (its signing keys included).
func (e *Engine) Project(ctx context.Context, id string) (*Project, error) {
	return view(ctx, e.store, func(tx *storage.Tx) (*Project, error) { return tx.Project(id) })
}

// ProjectForToken returns the id of the project a token hash belongs to.
func (e *Engine) ProjectForToken(ctx context.Context, tokenHash string) (string, error) {
	return view(ctx, e.store, func(tx *storage.Tx) (string, error) { return tx.TokenProject(tokenHash) })
}

// EnsureProject creates the project p (with its signing keys) and binds tokenHash to it,
// unless a project with that id exists; then only the token binding is added. It returns
// the stored project.
func EnsureProject(ctx context.Context, store Store, p Project, tokenHash string) (*Project, error) {
	return update(ctx, store, func(tx *storage.Tx) (*Project, error) {
		out, err := tx.Project(p.ID)
		switch {
		case err == nil:
		case errors.Is(err, storage.ErrNotFound):
			created := p
			if err := tx.CreateProject(&created); err != nil {
				return nil, err
			}
			out = &created
		default:
			return nil, err
		}
		if tokenHash == "" {
			return out, nil
		}
		owner, err := tx.TokenProject(tokenHash)
		switch {
		case err == nil && owner != p.ID:
			return nil, fmt.Errorf("token already belongs to project %q", owner)
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return nil, err
		}
		return out, tx.PutToken(tokenHash, p.ID)
	})
}

// ListProjects lists every project.
func ListProjects(ctx context.Context, store Store) ([]Project, error) {
	return view(ctx, store, func(tx *storage.Tx) ([]Project, error) { return tx.Projects() })
}
