package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// Spec is a schedule to create or replace.
type Spec struct {
	// ID names the schedule; empty: a new id. An existing id is replaced (its creation
	// time is kept).
	ID      string
	Project string
	Cron    string
	// Template is the message of every tick (URL, method, headers, body, queue, retries,
	// callbacks, flow control, labels, caller IP).
	Template delivery.Message
	// DelayMs delays every tick's message.
	DelayMs int64
}

// Create stores a schedule and returns its id. Its first tick is the first cron time
// after now.
func (s *Scheduler) Create(ctx context.Context, spec Spec) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c, err := ParseCron(spec.Cron)
	if err != nil {
		return "", err
	}
	id := spec.ID
	if id == "" {
		id = newID()
	} else if len(id) > MaxIDLen || !idPattern.MatchString(id) {
		return "", fmt.Errorf("%w: want at most %d of [a-zA-Z0-9-_.]", ErrBadID, MaxIDLen)
	}
	now := s.cfg.Now()
	tmpl := spec.Template
	tmpl.Project = spec.Project
	rec := storage.Schedule{ID: id, Project: spec.Project, Cron: spec.Cron, CreatedAt: now.UnixMilli(),
		Template: tmpl, DelayMs: spec.DelayMs, NextAt: nextTick(c, now, time.Time{}).UnixMilli()}
	err = s.store.Update(func(tx *storage.Tx) error {
		r := rec
		old, err := tx.Schedule(spec.Project, id)
		switch {
		case err == nil:
			r.CreatedAt = old.CreatedAt
		case !errors.Is(err, storage.ErrNotFound):
			return err
		default:
			if n := tx.ScheduleCount(spec.Project); n >= s.cfg.MaxPerProject {
				return fmt.Errorf("%w: the project has %d schedules, the limit is %d", ErrLimit, n, s.cfg.MaxPerProject)
			}
		}
		return tx.PutSchedule(&r)
	})
	if err != nil {
		return "", err
	}
	s.setNext(key{spec.Project, id}, rec.NextAt)
	return id, nil
}

// Get reads one schedule.
func (s *Scheduler) Get(ctx context.Context, project, id string) (*storage.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sc *storage.Schedule
	err := s.store.View(func(tx *storage.Tx) error {
		var err error
		sc, err = tx.Schedule(project, id)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return sc, err
}

// List lists a project's schedules by id.
func (s *Scheduler) List(ctx context.Context, project string) ([]storage.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []storage.Schedule
	err := s.store.View(func(tx *storage.Tx) error {
		var err error
		out, err = tx.Schedules(project)
		return err
	})
	return out, err
}

// Delete removes a schedule; messages it already published stay.
func (s *Scheduler) Delete(ctx context.Context, project, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.store.Update(func(tx *storage.Tx) error { return tx.DeleteSchedule(project, id) })
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err == nil {
		s.setNext(key{project, id}, 0)
	}
	return err
}

// SetPaused pauses or resumes a schedule. A paused schedule fires nothing; resuming it
// fires from the next tick after now (the ticks that fell while it was paused are not
// fired).
func (s *Scheduler) SetPaused(ctx context.Context, project, id string, paused bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.cfg.Now()
	var next int64
	err := s.store.Update(func(tx *storage.Tx) error {
		sc, err := tx.Schedule(project, id)
		if err != nil {
			return err
		}
		next = 0
		if sc.Paused == paused {
			if !paused {
				next = sc.NextAt
			}
			return nil
		}
		if !paused {
			c, err := ParseCron(sc.Cron)
			if err != nil {
				return err
			}
			next = nextTick(c, now, time.Time{}).UnixMilli()
		}
		sc.Paused, sc.NextAt = paused, next
		return tx.PutSchedule(sc)
	})
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err == nil {
		s.setNext(key{project, id}, next)
	}
	return err
}

// Schedule is the stored schedule record.
type Schedule = storage.Schedule
