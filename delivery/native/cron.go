package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // a trigger's tz must not depend on the host's zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// Cron triggers (docs/protocol.md, "Native workflows"): a definition's {"cron", "tz"?} trigger
// has one pending fire, a timer of the flusher (storage/native_timers.go) at the next
// scheduled instant. Firing it starts the run and stores the following fire in one
// transaction, so an instant fires at most once, across crashes too. After downtime the
// most recent missed instant fires once, late; the others are skipped.

// MaxCronLen caps a cron trigger's expression; MaxTZLen its zone name.
const (
	MaxCronLen = 256
	MaxTZLen   = 64
)

// cronLateAfter is how long after its instant a fire still counts as on time.
const cronLateAfter = time.Minute

// cronParser reads the five-field form only: no seconds, no descriptors (@hourly), no
// CRON_TZ prefix (the zone is the trigger's tz).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// cronSince is where cronSchedule looks for a first instant: a leap year, so 29
// February is found.
var cronSince = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// cronSchedule parses a cron trigger; the error says what is wrong with which part.
func cronSchedule(expr, tz string) (cron.Schedule, error) {
	if expr == "" || len(expr) > MaxCronLen {
		return nil, fmt.Errorf("cron: want a five-field expression of 1 to %d bytes", MaxCronLen)
	}
	if strings.HasPrefix(expr, "@") || strings.Contains(expr, "TZ=") {
		return nil, fmt.Errorf("cron: %q: want five fields (minute hour day-of-month month day-of-week); the zone goes in \"tz\"", expr)
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron: %q: %v", expr, err)
	}
	loc := time.UTC
	if tz != "" {
		if len(tz) > MaxTZLen {
			return nil, fmt.Errorf("tz: want an IANA zone name of at most %d bytes", MaxTZLen)
		}
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("tz: %q is not an IANA time zone", tz)
		}
	}
	spec := sched.(*cron.SpecSchedule)
	spec.Location = loc
	// The parser looks five years ahead, which covers every day of every month from a
	// leap year on: a schedule that finds nothing there names a date that never occurs.
	if spec.Next(cronSince).IsZero() {
		return nil, fmt.Errorf("cron: %q names a date that never occurs (such as 30 February)", expr)
	}
	return spec, nil
}

// parseTrigger reads triggers[j] (field), refusing one that repeats an earlier trigger.
// It returns the field the error is about.
func parseTrigger(field string, raw json.RawMessage, prev []Trigger) (Trigger, string, error) {
	var t Trigger
	if err := flowctl.DecodeStrict(field, raw, []string{"event", "cron", "tz"}, &t); err != nil {
		var fe *flowctl.FieldError
		if errors.As(err, &fe) {
			return t, fe.Field, errors.New(fe.Msg)
		}
		return t, field, err
	}
	switch {
	case t.Event != "" && t.Cron != "":
		return t, field, errors.New("give \"event\" or \"cron\", not both")
	case t.Cron != "":
		if _, err := cronSchedule(t.Cron, t.TZ); err != nil {
			sub, msg, _ := strings.Cut(err.Error(), ": ")
			return t, field + "." + sub, errors.New(msg)
		}
		for _, p := range prev {
			if p.Cron == t.Cron && p.TZ == t.TZ {
				return t, field + ".cron", fmt.Errorf("cron %q is listed twice", t.Cron)
			}
		}
		return t, "", nil
	case t.TZ != "":
		return t, field + ".tz", errors.New("only a cron trigger has a zone")
	}
	if err := checkEventName(t.Event); err != nil {
		return t, field + ".event", err
	}
	for _, p := range prev {
		if p.Event == t.Event {
			return t, field + ".event", fmt.Errorf("event %q is listed twice", t.Event)
		}
	}
	return t, "", nil
}

// armCronTx gives every cron trigger of d its pending fire: one already pending for the
// same expression and zone is kept (registering an app again moves no fire), any other
// starts at the first instant after now.
func armCronTx(tx *storage.Tx, project string, d *Workflow, now time.Time) error {
	if err := dropStaleCronTx(tx, project, d); err != nil {
		return err
	}
	for i, tr := range d.Triggers {
		if tr.Cron == "" {
			continue
		}
		old, err := tx.CronTimerOf(project, d.Name, i)
		switch {
		case err == nil && old.Cron == tr.Cron && old.TZ == tr.TZ:
			continue
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return err
		}
		sched, err := cronSchedule(tr.Cron, tr.TZ)
		if err != nil {
			return fmt.Errorf("workflow %q: triggers[%d]: %w", d.Name, i, err)
		}
		at := sched.Next(now)
		if at.IsZero() {
			continue // no instant in the parser's horizon: nothing to fire
		}
		if err := tx.PutCronTimer(project, &storage.CronTimer{Workflow: d.Name, Trigger: i, Cron: tr.Cron, TZ: tr.TZ, At: at.UnixMilli()}); err != nil {
			return err
		}
	}
	return nil
}

// dropStaleCronTx removes the pending fires of d's name whose trigger index no longer
// holds a cron trigger (a definition registered again with fewer of them).
func dropStaleCronTx(tx *storage.Tx, project string, d *Workflow) error {
	for i := range MaxTriggers {
		if i < len(d.Triggers) && d.Triggers[i].Cron != "" {
			continue
		}
		if _, err := tx.CronTimerOf(project, d.Name, i); errors.Is(err, storage.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if err := tx.DeleteCronTimer(project, d.Name, i); err != nil {
			return err
		}
	}
	return nil
}

// cronData is the data of a cron fire's event.
type cronData struct {
	Cron        string `json:"cron"`
	TZ          string `json:"tz,omitempty"`
	ScheduledAt int64  `json:"scheduledAt"`
	Late        bool   `json:"late,omitempty"`
}

// fireCronTx fires a due cron timer: the most recent instant not after now (a late one
// when the timer's own instant was missed) starts a run through the workflow's gates, and
// the next instant becomes the pending fire. A timer whose workflow or trigger is gone is
// dropped.
func (s *Service) fireCronTx(n *delivery.NativeTx, project string, nt storage.NativeTimer) (EventRun, bool, error) {
	tx, now := n.Tx, n.Now
	c := nt.Cron
	if err := tx.DeleteNativeTimer(project, nt); err != nil {
		return EventRun{}, false, err
	}
	d, err := tx.WorkflowDef(project, c.Workflow)
	if errors.Is(err, storage.ErrNotFound) {
		return EventRun{}, false, nil
	}
	if err != nil {
		return EventRun{}, false, err
	}
	if c.Trigger >= len(d.Triggers) || d.Triggers[c.Trigger].Cron != c.Cron || d.Triggers[c.Trigger].TZ != c.TZ {
		return EventRun{}, false, nil
	}
	sched, err := cronSchedule(c.Cron, c.TZ)
	if err != nil {
		return EventRun{}, false, fmt.Errorf("workflow %q: triggers[%d]: %w", c.Workflow, c.Trigger, err)
	}
	at := latestInstant(sched, time.UnixMilli(c.At), now)
	data, err := json.Marshal(cronData{Cron: c.Cron, TZ: c.TZ, ScheduledAt: at.UnixMilli(),
		Late: at.UnixMilli() != c.At || now.Sub(at) > cronLateAfter})
	if err != nil {
		return EventRun{}, false, err
	}
	ev := Event{ID: s.ids.New(storage.PrefixEvent, now), Name: storage.CronEventName, Data: data, Ts: at.UnixMilli(), Runs: []EventRun{}}
	pe := payloadEvent{ID: ev.ID, Name: ev.Name, Data: ev.Data, Ts: ev.Ts}
	r, err := s.routeTx(n, project, d, pe, newKeyEvent(pe))
	if err != nil {
		return EventRun{}, false, fmt.Errorf("workflow %q: %w", d.Name, err)
	}
	ev.Runs = append(ev.Runs, r)
	if err := tx.PutEvent(project, &ev); err != nil {
		return EventRun{}, false, err
	}
	if next := sched.Next(at); !next.IsZero() {
		c2 := *c
		c2.At = next.UnixMilli()
		if err := tx.PutCronTimer(project, &c2); err != nil {
			return EventRun{}, false, err
		}
	}
	return r, true, nil
}

// latestInstant is the last instant of sched not after now, from first (an instant not
// after now). A long downtime is not walked minute by minute: the search starts in the
// smallest window before now, doubling from an hour, that holds an instant.
func latestInstant(sched cron.Schedule, first, now time.Time) time.Time {
	from := first
	for w := time.Hour; w < now.Sub(first); w *= 2 {
		if n := sched.Next(now.Add(-w)); !n.IsZero() && !n.After(now) {
			from = n
			break
		}
	}
	for range 100_000 {
		n := sched.Next(from)
		if n.IsZero() || n.After(now) {
			break
		}
		from = n
	}
	return from
}
