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
