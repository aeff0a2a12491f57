package native

import (
	"context"
	"errors"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// The flusher fires debounce and batch deadlines, delayed events and cron triggers. The
// deadlines are stored with their buffers (storage/native_buffers.go) and in the timer
// index (storage/native_timers.go), so one that passed while the server was down fires
// at start-up: Start flushes everything due before it sleeps.

// flushBatch bounds the buffers one transaction fires.
const flushBatch = 100

// flushRetry is the pause after a failed flush.
const flushRetry = time.Second

// Start runs the flusher until ctx ends or Stop is called.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return errors.New("native: flusher already started")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.stop, s.done = cancel, make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Stop ends the flusher and waits for it; a flush in progress is abandoned (its
// transaction either committed or changed nothing).
func (s *Service) Stop() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		wait := s.cfg.FlushIdle
		next, err := s.FlushDue(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.cfg.Logger.Error("native_flush_failed", "err", err)
			wait = flushRetry
		case !next.IsZero():
			wait = min(wait, max(next.Sub(s.cfg.Now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// FlushDue starts the run of every debounce and batch buffer whose deadline has passed,
// fans out the due delayed events and fires the due cron triggers, and returns the
// earliest deadline still pending (zero: none).
func (s *Service) FlushDue(ctx context.Context) (time.Time, error) {
	var projects []storage.Project
	if err := s.store.View(func(tx *storage.Tx) (err error) { projects, err = tx.Projects(); return err }); err != nil {
		return time.Time{}, err
	}
	var next int64
	for _, p := range projects {
		for {
			fired, err := delivery.NativeUpdate(ctx, s.engine, func(n *delivery.NativeTx) ([]EventRun, error) {
				keys, err := n.Tx.DueGateBuffers(p.ID, n.Now.UnixMilli(), flushBatch)
				if err != nil {
					return nil, err
				}
				out := make([]EventRun, 0, len(keys))
				for _, k := range keys {
					r, err := s.flushTx(n, p.ID, k)
					if err != nil {
						return nil, err
					}
					out = append(out, r)
				}
				return out, nil
			})
			if err != nil {
				return time.Time{}, err
			}
			for _, r := range fired {
				switch {
				case r.Skipped:
					s.cfg.Logger.Info("native_buffer_skipped", "project", p.ID, "workflow", r.Workflow, "holder_run_id", r.HolderRunID)
				case r.Dropped:
					s.cfg.Logger.Warn("native_buffer_dropped", "project", p.ID, "workflow", r.Workflow, "reason", "workflow removed")
				}
			}
			if len(fired) < flushBatch {
				break
			}
		}
		if err := s.fireTimers(ctx, p.ID); err != nil {
			return time.Time{}, err
		}
		err := s.store.View(func(tx *storage.Tx) error {
			if d, ok := tx.NextGateBufferDeadline(p.ID); ok && (next == 0 || d < next) {
				next = d
			}
			if d, ok := tx.NextNativeTimer(p.ID); ok && (next == 0 || d < next) {
				next = d
			}
			return nil
		})
		if err != nil {
			return time.Time{}, err
		}
	}
	if next == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(next), nil
}

// timerBatch bounds the timers one transaction fires: each may start a run of every
// workflow its event triggers.
const timerBatch = 16

// fireTimers fans out a project's due delayed events and fires its due cron triggers.
func (s *Service) fireTimers(ctx context.Context, project string) error {
	for {
		fired, err := delivery.NativeUpdate(ctx, s.engine, func(n *delivery.NativeTx) (int, error) {
			due, err := n.Tx.DueNativeTimers(project, n.Now.UnixMilli(), timerBatch)
			if err != nil {
				return 0, err
			}
			for _, nt := range due {
				if nt.Cron != nil {
					_, _, err = s.fireCronTx(n, project, nt)
				} else {
					_, err = s.fireDelayedTx(n, project, nt)
				}
				if err != nil {
					return 0, err
				}
			}
			return len(due), nil
		})
		if err != nil || fired < timerBatch {
			return err
		}
	}
}
