package delivery

import "github.com/duraton/duraton/storage"

// RunWatcher is told, after the commit, which runs a transaction of the engine changed
// (their record, history or cursor): the live run streams (server/live) implement it.
// Watching is asked before each write: while it reports false the engine records
// nothing, so an engine nobody watches pays one call per write. A commit that started
// while Watching was false is not reported; watchers re-read what they show now and then
// for that. RunsChanged runs on the writer's goroutine and must not block.
type RunWatcher interface {
	Watching() bool
	RunsChanged(refs []storage.RunRef)
}

// RunRef names a run a write changed.
type RunRef = storage.RunRef

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

// Watchers is one RunWatcher telling each of ws (nil entries are left out; nil when none
// is left).
func Watchers(ws ...RunWatcher) RunWatcher {
	var out multiWatcher
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type multiWatcher []RunWatcher

func (m multiWatcher) Watching() bool {
	for _, w := range m {
		if w.Watching() {
			return true
		}
	}
	return false
}

func (m multiWatcher) RunsChanged(refs []RunRef) {
	for _, w := range m {
		if w.Watching() {
			w.RunsChanged(refs)
		}
	}
}
