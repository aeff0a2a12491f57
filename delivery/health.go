package delivery

import (
	"errors"
	"fmt"

	"github.com/duraton/duraton/storage"
)

// Readiness errors, for /readyz. They name the cause without any data.
var (
	ErrNotStarted = errors.New("engine not started")
	ErrDraining   = errors.New("engine draining")
	ErrDispatcher = errors.New("dispatcher not running")
)

// Ready reports whether the engine can take and deliver work: started, not stopping,
// its dispatch loop alive, and its store answering a read transaction (a closed bbolt
// file refuses one).
func (e *Engine) Ready() error {
	e.mu.Lock()
	started, stopping := e.started, e.stopping
	e.mu.Unlock()
	switch {
	case !started:
		return ErrNotStarted
	case stopping:
		return ErrDraining
	}
	select {
	case <-e.disp.done:
		return ErrDispatcher
	default:
	}
	if err := e.store.View(func(*storage.Tx) error { return nil }); err != nil {
		return fmt.Errorf("store not readable: %w", err)
	}
	return nil
}
