package urlgroup

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/duraton/duraton/storage"
)

// Group is a stored URL group; Endpoint one of its destinations.
type (
	Group    = storage.Topic
	Endpoint = storage.TopicEndpoint
)

// Errors of the group operations.
var (
	ErrNotFound         = fmt.Errorf("url group %w", storage.ErrNotFound)
	ErrEndpointNotFound = fmt.Errorf("endpoint %w", storage.ErrNotFound)
	ErrLimit            = errors.New("url group limit reached")
	ErrInvalid          = errors.New("invalid url group request")
)

// Limits and name rules.
const (
	MaxNameLen = 128
)

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.]+$`)

// ValidName reports whether name can name a group or an endpoint.
func ValidName(name string) bool {
	return len(name) <= MaxNameLen && namePattern.MatchString(name)
}

// Store is what the groups need of storage.
type Store interface {
	Update(fn func(*storage.Tx) error) error
	View(fn func(*storage.Tx) error) error
}

var _ Store = (*storage.Store)(nil)

// Config configures Groups. Zero fields take the documented defaults.
type Config struct {
	// MaxGroups caps a project's URL groups. Default 1,000.
	MaxGroups int
	// MaxEndpoints caps one group's endpoints (and so one publication's fan-out).
	// Default 100.
	MaxEndpoints int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxGroups <= 0 {
		c.MaxGroups = 1000
	}
	if c.MaxEndpoints <= 0 {
		c.MaxEndpoints = 100
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Groups manages the URL groups of every project.
type Groups struct {
	cfg   Config
	store Store
}

// New builds Groups over store.
func New(cfg Config, store Store) *Groups {
	return &Groups{cfg: cfg.withDefaults(), store: store}
}

// MaxEndpoints is the configured cap of one group's endpoints.
func (g *Groups) MaxEndpoints() int { return g.cfg.MaxEndpoints }

// AddEndpoints creates the group if needed and adds endpoints to it. An endpoint with the
// URL or the (non-empty) name of an existing one replaces it.
func (g *Groups) AddEndpoints(ctx context.Context, project, name string, eps []Endpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.check(name, eps, true); err != nil {
		return err
	}
	now := g.cfg.Now().UnixMilli()
	return g.store.Update(func(tx *storage.Tx) error {
		tp, err := tx.Topic(project, name)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			if n := tx.TopicCount(project); n >= g.cfg.MaxGroups {
				return fmt.Errorf("%w: the project has %d URL groups, the limit is %d", ErrLimit, n, g.cfg.MaxGroups)
			}
			tp = &storage.Topic{Name: name, CreatedAt: now}
		case err != nil:
			return err
		}
		// A fresh slice: this function may run twice and must not change what it read.
		merged := make([]Endpoint, 0, len(tp.Endpoints)+len(eps))
		for _, old := range tp.Endpoints {
			if !replacedBy(old, eps) {
				merged = append(merged, old)
			}
		}
		merged = append(merged, eps...)
		if len(merged) > g.cfg.MaxEndpoints {
			return fmt.Errorf("%w: the group would have %d endpoints, the limit is %d", ErrLimit, len(merged), g.cfg.MaxEndpoints)
		}
		updated := *tp
		updated.Endpoints, updated.UpdatedAt = merged, now
		return tx.PutTopic(project, &updated)
	})
}

// replacedBy reports whether one of eps names the same URL or endpoint name as old.
func replacedBy(old Endpoint, eps []Endpoint) bool {
	for _, e := range eps {
		if e.URL == old.URL || (e.Name != "" && e.Name == old.Name) {
			return true
		}
	}
	return false
}

// RemoveEndpoints removes the endpoints matching each of eps by name or URL. Every one
// must match something, else nothing changes (ErrEndpointNotFound). A group left empty
// stays, with no endpoints.
func (g *Groups) RemoveEndpoints(ctx context.Context, project, name string, eps []Endpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.check(name, eps, false); err != nil {
		return err
	}
	now := g.cfg.Now().UnixMilli()
	return g.store.Update(func(tx *storage.Tx) error {
		tp, err := tx.Topic(project, name)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		if err != nil {
			return err
		}
		for _, e := range eps {
			if !matchesAny(e, tp.Endpoints) {
				return fmt.Errorf("%w: no endpoint of %q has name %q or url %q", ErrEndpointNotFound, name, e.Name, e.URL)
			}
		}
		kept := make([]Endpoint, 0, len(tp.Endpoints))
		for _, old := range tp.Endpoints {
			if !matchesAny(old, eps) {
				kept = append(kept, old)
			}
		}
		updated := *tp
		updated.Endpoints, updated.UpdatedAt = kept, now
		return tx.PutTopic(project, &updated)
	})
}

// matchesAny reports whether e and one of list share a non-empty name or URL.
func matchesAny(e Endpoint, list []Endpoint) bool {
	for _, o := range list {
		if (e.Name != "" && e.Name == o.Name) || (e.URL != "" && e.URL == o.URL) {
			return true
		}
	}
	return false
}

func (g *Groups) check(name string, eps []Endpoint, adding bool) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: group name %q must match %s and be at most %d bytes", ErrInvalid, name, namePattern, MaxNameLen)
	}
	if len(eps) == 0 {
		return fmt.Errorf("%w: endpoints is empty", ErrInvalid)
	}
	if len(eps) > g.cfg.MaxEndpoints {
		return fmt.Errorf("%w: %d endpoints, the limit is %d", ErrInvalid, len(eps), g.cfg.MaxEndpoints)
	}
	for i, e := range eps {
		if e.Name != "" && !ValidName(e.Name) {
			return fmt.Errorf("%w: endpoints[%d].name %q must match %s and be at most %d bytes", ErrInvalid, i, e.Name, namePattern, MaxNameLen)
		}
		if adding && e.URL == "" {
			return fmt.Errorf("%w: endpoints[%d].url is required", ErrInvalid, i)
		}
		if !adding && e.URL == "" && e.Name == "" {
			return fmt.Errorf("%w: endpoints[%d] needs a name or a url", ErrInvalid, i)
		}
	}
	return nil
}

// Get reads one group.
func (g *Groups) Get(ctx context.Context, project, name string) (*Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var tp *storage.Topic
	err := g.store.View(func(tx *storage.Tx) error {
		var err error
		tp, err = tx.Topic(project, name)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return tp, err
}

// List lists a project's groups by name.
func (g *Groups) List(ctx context.Context, project string) ([]Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []storage.Topic
	err := g.store.View(func(tx *storage.Tx) error {
		var err error
		out, err = tx.Topics(project)
		return err
	})
	return out, err
}

// Delete removes a group; messages already fanned out stay.
func (g *Groups) Delete(ctx context.Context, project, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := g.store.Update(func(tx *storage.Tx) error { return tx.DeleteTopic(project, name) })
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return err
}
