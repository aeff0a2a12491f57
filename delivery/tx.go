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
