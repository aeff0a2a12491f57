package delivery

import (
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
func (e *Engine) RotateKeys(project string) (*Project, error) {
	next := NewSigningKey()
	var p *Project
	err := e.store.Update(func(tx *storage.Tx) error {
		cur, err := tx.Project(project)
		if err != nil {
			return err
		}
		rotated := *cur
		rotated.CurrentSigningKey, rotated.NextSigningKey = cur.NextSigningKey, next
		p = &rotated
		return tx.PutProject(&rotated)
	})
	if err != nil {
		return nil, err
	}
	e.keys.set(project, p.CurrentSigningKey)
	return p, nil
}

// Project reads a project's record (its signing keys included).
func (e *Engine) Project(id string) (*Project, error) {
	var p *Project
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		p, err = tx.Project(id)
		return err
	})
	return p, err
}

// ProjectForToken returns the id of the project a token hash belongs to.
func (e *Engine) ProjectForToken(tokenHash string) (string, error) {
	var id string
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		id, err = tx.TokenProject(tokenHash)
		return err
	})
	return id, err
}

// EnsureProject creates the project p (with its signing keys) and binds tokenHash to it,
// unless a project with that id exists; then only the token binding is added. It returns
// the stored project.
func EnsureProject(store Store, p Project, tokenHash string) (*Project, error) {
	var out *Project
	err := store.Update(func(tx *storage.Tx) error {
		cur, err := tx.Project(p.ID)
		switch {
		case err == nil:
			out = cur
		case errors.Is(err, storage.ErrNotFound):
			if err := tx.CreateProject(&p); err != nil {
				return err
			}
			out = &p
		default:
			return err
		}
		if tokenHash == "" {
			return nil
		}
		if owner, err := tx.TokenProject(tokenHash); err == nil && owner != p.ID {
			return fmt.Errorf("token already belongs to project %q", owner)
		}
		return tx.PutToken(tokenHash, p.ID)
	})
	return out, err
}

// ListProjects lists every project.
func ListProjects(store Store) ([]Project, error) {
	var out []Project
	err := store.View(func(tx *storage.Tx) error {
		var err error
		out, err = tx.Projects()
		return err
	})
	return out, err
}
