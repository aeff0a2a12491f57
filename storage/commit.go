package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage/kv"
)

// The group commit, leader/follower style (as LevelDB's and RocksDB's write queues):
// a caller of Update that finds no commit in progress commits itself, on its own
// goroutine, together with every function queued meanwhile; callers that arrive
// during a commit queue up, and when it ends the oldest of them is woken to lead the
// next group. There is no timer and no committer goroutine: a group is what queued
// while the previous one was being made durable.
//
// Why not a committer goroutine: at low load each commit then cost two goroutine
// hand-offs (to the committer and back), and on a machine with idle CPUs each hand-off
// wakes an idle thread, which spins and sleeps again. `bench workflow --concurrency 1`
// ran about 100 µs of server CPU and 0.1 ms per step cheaper with GOMAXPROCS=1, where no
// hand-off wakes another thread; this commit's two were among the four per step (the
// dispatcher's are in delivery/dispatch.go). Under load the hand-offs are the same as
// before: the members of a group are woken with their results, the next leader instead
// of later.

// op is one Update function and where its result goes.
type op struct {
	fn   func(*Tx) error
	done chan error // buffered (1): a result, or errLead
	// track asks for the runs fn changed (UpdateRuns); runs holds them once fn ran
	// without error in the pass that commits.
	track bool
	runs  []RunRef
}

// errLead tells a queued caller that it leads the next group. It never leaves Update.
var errLead = errors.New("storage: lead the next group commit")

// Update runs fn in a read-write transaction shared with other concurrent callers, and
// returns once that transaction is durable on disk. fn may run more than once and must
// not have side effects outside the transaction. An error from fn rolls back only fn's
// effects: the other functions of the group are committed without it. fn may run on
// another caller's goroutine.
func (s *Store) Update(fn func(*Tx) error) error {
	return s.enqueue(&op{fn: fn, done: make(chan error, 1)})
}

// enqueue commits o with the group and returns its result.
func (s *Store) enqueue(o *op) error {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, o)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if lead {
		s.lead()
	}
	for {
		err := <-o.done
		if err != errLead {
			return err
		}
		s.lead()
	}
}

// QueuedUpdates is how many Update functions wait for the group being committed: the
// next group's size so far (a gauge; tests wait on it to form a group).
func (s *Store) QueuedUpdates() int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue)
}

// lead commits one group: the oldest queued functions, up to MaxBatch, the leader's own
// among them. It then hands the lead to the oldest function still queued, or gives it
// up when there is none.
func (s *Store) lead() {
	s.qmu.Lock()
	n := min(len(s.queue), s.opts.MaxBatch)
	s.batch = append(s.batch[:0], s.queue[:n]...)
	rest := copy(s.queue, s.queue[n:])
	clear(s.queue[rest:])
	s.queue = s.queue[:rest]
	s.qmu.Unlock()

	defer func() {
		if r := recover(); r != nil {
			// A function panicked: its group fails (each caller not yet answered gets the
			// error; an answered one keeps its answer), the lead moves on, and the panic
			// goes on up the leader's stack.
			err := fmt.Errorf("storage: commit: %w: panic: %v", ErrWriteFailed, r)
			for _, o := range s.batch {
				select {
				case o.done <- err:
				default:
				}
			}
			s.passLead()
			panic(r)
		}
	}()
	s.commit(s.batch)
	clear(s.batch) // the functions' closures are garbage now
	s.passLead()
}

// passLead wakes the oldest queued caller to lead the next group, or ends the leading.
func (s *Store) passLead() {
	s.qmu.Lock()
	if len(s.queue) == 0 {
		s.leading = false
		if s.drained != nil {
			close(s.drained)
			s.drained = nil
		}
		s.qmu.Unlock()
		return
	}
	next := s.queue[0]
	s.qmu.Unlock()
	next.done <- errLead
}

// stopCommitter refuses further writes and waits for the queued ones to commit. It
// reports false when the store was closed already.
func (s *Store) stopCommitter() bool {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return false
	}
	s.closed = true
	var drained chan struct{}
	if s.leading {
		drained = make(chan struct{})
		s.drained = drained
	}
	s.qmu.Unlock()
	if drained != nil {
		<-drained
	}
	return true
}

// count adds a commit of size functions to the stats (those that failed were taken out).
func (s *Store) count(start time.Time, size int) {
	took := time.Since(start)
	s.stats.commits.Add(1)
	s.stats.ops.Add(int64(size))
	s.stats.commitNanos.Add(int64(took))
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(size, took)
	}
}

// failedOp carries the index of the function that failed a pass.
type failedOp struct {
	index int
	err   error
}

func (f *failedOp) Error() string { return f.err.Error() }

// commit runs ops in one transaction. If one fails, its caller gets its error and the
// rest are committed in one more pass without it, in which any function that fails is
// undone in place (commit_undo.go) and fails its own caller only. A group whose commit
// is over the log's bound (ErrCommitTooLarge) is committed one function at a time. Any
// other failure of the engine (a commit, a lost connection) fails the whole group. A group that panics is
// not counted in the stats.
func (s *Store) commit(ops []*op) {
	start := time.Now()
	var j *journal           // nil in the first pass
	var failed map[int]error // functions failed and undone in the second pass
	for len(ops) > 0 {
		err := s.engine.Update(func(ktx kv.Tx) error {
			clear(failed) // the engine may run this again (storage/pg after a lost connection)
			tx := &Tx{tx: ktx}
			if j != nil {
				tx.tx = journalTx{tx: ktx, j: j}
			}
			for i, o := range ops {
				if j != nil {
					j.begin()
				}
				tx.beginOp(o)
				err := o.fn(tx)
				if err == nil {
					o.runs = tx.runs
					continue
				}
				if j == nil || j.undo() != nil {
					return &failedOp{index: i, err: err}
				}
				failed[i] = err
			}
			return nil
		})
		if errors.Is(err, ErrCommitTooLarge) && len(ops) > 1 {
			// The group's record is over the log's bound, which none of its functions
			// may be alone: each is committed on its own, so that only one too large by
			// itself fails, and fails alone. (A function may run again: it returns what
			// it made.)
			for _, o := range ops {
				s.commit([]*op{o})
			}
			return
		}
		var f *failedOp
		if errors.As(err, &f) {
			ops[f.index].done <- f.err
			ops = append(ops[:f.index:f.index], ops[f.index+1:]...)
			if j == nil {
				j, failed = &journal{}, map[int]error{}
			}
			continue
		}
		if err != nil {
			err = fmt.Errorf("storage: commit: %w: %w", ErrWriteFailed, err)
		}
		for i, o := range ops {
			if ferr, ok := failed[i]; ok {
				o.done <- ferr
				continue
			}
			o.done <- err
		}
		s.count(start, len(ops)-len(failed))
		return
	}
	s.count(start, 0)
}
