package delivery

import (
	"context"

	"github.com/duraton/duraton/delivery/internal/aimeter"
	"github.com/duraton/duraton/storage"
)

// Store is what the engine needs of storage: group-committed writes and reads.
type Store interface {
	Update(fn func(*storage.Tx) error) error
	View(fn func(*storage.Tx) error) error
}

var _ Store = (*storage.Store)(nil)

// effects is what a committed transaction hands the scheduler: due entries it created
// (to add) and due entries it removed while they may be waiting in memory (to forget).
type effects struct {
	add, forget []storage.DueEntry
	ended       []string      // final states of the runs the transaction ended (metrics)
	tokens      []aimeter.Adj // tokenThrottle bucket changes (ai.go)
	inlined     int           // step messages an inline answer stored (metrics; inline.go)
}

func (fx *effects) merge(o effects) {
	fx.tokens = append(fx.tokens, o.tokens...)
	fx.add = append(fx.add, o.add...)
	fx.forget = append(fx.forget, o.forget...)
	fx.ended = append(fx.ended, o.ended...)
	fx.inlined += o.inlined
}

// update runs fn in a group-committed write transaction and returns what fn returned in
// the run that committed.
//
// This is the engine's one way to write, and it makes the store's rule mechanical: the
// group committer runs fn again when a neighbour in its group fails, so fn must return
// what it made and change nothing outside the transaction — no captured variable, no
// field of its inputs. Ids made inside fn are fine: only the committed run's are returned.
func update[T any](ctx context.Context, s Store, fn func(tx *storage.Tx) (T, error)) (T, error) {
	var out T
	if err := ctx.Err(); err != nil {
		return out, err
	}
	err := s.Update(func(tx *storage.Tx) error {
		v, err := fn(tx)
		if err != nil {
			return err
		}
		out = v
		return nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// view runs fn in a read transaction and returns what it read.
func view[T any](ctx context.Context, s Store, fn func(tx *storage.Tx) (T, error)) (T, error) {
	var out T
	if err := ctx.Err(); err != nil {
		return out, err
	}
	err := s.View(func(tx *storage.Tx) error {
		v, err := fn(tx)
		out = v
		return err
	})
	return out, err
}

// The store wrapper of live streams (watch.go): its Update is the one write path, so it
// lives here with update.

// runsUpdater is a Store that can say which runs a write changed (storage.Store).
type runsUpdater interface {
	UpdateRuns(fn func(*storage.Tx) error) ([]storage.RunRef, error)
}

// watchedStore reports the runs its writes change to a RunWatcher while it watches.
type watchedStore struct {
	Store
	up runsUpdater
	w  RunWatcher
}

func (s watchedStore) Update(fn func(*storage.Tx) error) error {
	if !s.w.Watching() {
		return s.Store.Update(fn)
	}
	refs, err := s.up.UpdateRuns(fn)
	if err == nil && len(refs) > 0 {
		s.w.RunsChanged(refs)
	}
	return err
}

// watch wraps store so that w hears of the runs its writes change; a store that cannot
// say (a test double) is returned as it is.
func watch(store Store, w RunWatcher) Store {
	up, ok := store.(runsUpdater)
	if w == nil || !ok {
		return store
	}
	return watchedStore{Store: store, up: up, w: w}
}
