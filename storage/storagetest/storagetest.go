// Package storagetest wraps a storage.Store for tests of the packages above it: Twice
// makes the group committer's "a write function may run twice" rule happen on every
// write, and Faults injects storage errors into chosen reads and writes. It also holds
// the storage behaviour suite every engine passes: Exercise (the Tx methods the engine
// relies on) and ExerciseKV (the engine seam), run on the embedded engine by
// storage/suite_test.go, on each engine by its package's suite_test.go
// (storage/internal/boltkv, storage/internal/walkv) and on PostgreSQL by
// storage/pg/suite_test.go. Test support only: production packages
// never import it (docs/architecture.md, "Import rules and why").
package storagetest

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/duraton/duraton/storage"
)

// Store is the part of storage.Store the engine uses; both wrappers implement it.
type Store interface {
	Update(fn func(*storage.Tx) error) error
	View(fn func(*storage.Tx) error) error
}

// errDiscard rolls back the first run of a function under Twice.
var errDiscard = errors.New("storagetest: first run discarded")

// Twice runs every Update function twice: once in a transaction that is rolled back
// (together with whatever else shared its group commit, so the neighbours run twice too),
// then for real. A function that mutates captured state or its inputs instead of
// returning what it made shows up as duplicated or lost work.
type Twice struct {
	Inner Store
	runs  atomic.Int64
}

// NewTwice wraps s.
func NewTwice(s Store) *Twice { return &Twice{Inner: s} }

// Update runs fn, rolls it back, and runs it again in a committed transaction.
func (t *Twice) Update(fn func(*storage.Tx) error) error {
	refuseNested("Update")
	t.runs.Add(1)
	err := t.Inner.Update(func(tx *storage.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errDiscard
	})
	if !errors.Is(err, errDiscard) {
		return err // the first run failed: a real Update would have failed the same way
	}
	return t.Inner.Update(fn)
}

// UpdateRuns is Update for an engine that reports the runs its writes change: the first
// run is rolled back as Update's, the second goes through the inner store's UpdateRuns
// (a *storage.Store's) when it has one, else through its Update, reporting nothing.
func (t *Twice) UpdateRuns(fn func(*storage.Tx) error) ([]storage.RunRef, error) {
	up, ok := t.Inner.(interface {
		UpdateRuns(fn func(*storage.Tx) error) ([]storage.RunRef, error)
	})
	if !ok {
		return nil, t.Update(fn)
	}
	refuseNested("Update")
	t.runs.Add(1)
	err := t.Inner.Update(func(tx *storage.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errDiscard
	})
	if !errors.Is(err, errDiscard) {
		return nil, err
	}
	return up.UpdateRuns(fn)
}

// View passes through.
func (t *Twice) View(fn func(*storage.Tx) error) error {
	refuseNested("View")
	return t.Inner.View(func(tx *storage.Tx) error { return fn(tx) })
}

// refuseNested panics when a transaction is opened from inside another's function on
// the same goroutine: with bbolt that deadlocks as soon as a commit has to grow the file
// in between (the outer read holds the mmap lock the commit waits for, and the inner
// one queues behind the commit), so it must never happen, and a rare deadlock in
// production is here a certain failure in every test that takes the path.
func refuseNested(what string) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, twicePrefix) && strings.HasSuffix(f.Function, ".func1") {
			panic("storagetest: a " + what + " opened inside another transaction's function (" + f.Function + "): nested transactions deadlock bbolt")
		}
		if !more {
			return
		}
	}
}

const twicePrefix = "github.com/duraton/duraton/storage/storagetest.(*Twice)."

// Updates is how many Update calls were made (each ran twice).
func (t *Twice) Updates() int64 { return t.runs.Load() }

// ErrInjected is the error Faults returns for an injected failure.
var ErrInjected = errors.New("storagetest: injected storage failure")

// Faults fails chosen Update and View calls. The decision functions see the 1-based
// index of the call among calls of its kind; nil decides "no fault".
type Faults struct {
	Inner Store

	mu         sync.Mutex
	updates    int
	views      int
	failUpdate func(n int) bool
	failView   func(n int) bool
	beforeOnce func() // runs once, before the next Update, outside any transaction
}

// NewFaults wraps s without any fault.
func NewFaults(s Store) *Faults { return &Faults{Inner: s} }

// FailUpdates sets which Update calls from now on fail (n counts from 1 at this call).
func (f *Faults) FailUpdates(fail func(n int) bool) {
	f.mu.Lock()
	f.updates, f.failUpdate = 0, fail
	f.mu.Unlock()
}

// FailViews sets which View calls from now on fail (n counts from 1 at this call).
func (f *Faults) FailViews(fail func(n int) bool) {
	f.mu.Lock()
	f.views, f.failView = 0, fail
	f.mu.Unlock()
}

// BeforeNextUpdate runs hook once, just before the next Update starts: a way to make
// something happen between a caller's read and its write.
func (f *Faults) BeforeNextUpdate(hook func()) {
	f.mu.Lock()
	f.beforeOnce = hook
	f.mu.Unlock()
}

// Nth returns a decision that fails exactly the n-th call.
func Nth(n int) func(int) bool { return func(i int) bool { return i == n } }

// Update fails when told to, else passes through.
func (f *Faults) Update(fn func(*storage.Tx) error) error {
	f.mu.Lock()
	f.updates++
	fail := f.failUpdate != nil && f.failUpdate(f.updates)
	hook := f.beforeOnce
	f.beforeOnce = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if fail {
		return ErrInjected
	}
	return f.Inner.Update(fn)
}

// View fails when told to, else passes through.
func (f *Faults) View(fn func(*storage.Tx) error) error {
	f.mu.Lock()
	f.views++
	fail := f.failView != nil && f.failView(f.views)
	f.mu.Unlock()
	if fail {
		return ErrInjected
	}
	return f.Inner.View(fn)
}
