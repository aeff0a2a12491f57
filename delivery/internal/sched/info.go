package sched

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// FlowInfo is the state of one flow-control key (the QStash API's FlowControlInfo, GET
// /v2/flowControl/{key}).
type FlowInfo struct {
	Key               string
	WaitListSize      int
	ParallelismMax    int
	ParallelismCount  int
	RateMax           int
	RateCount         int
	RatePeriod        time.Duration
	RatePeriodStart   time.Time
	Paused            bool
	PinnedParallelism bool
	PinnedRate        bool
}

func (q *flowQueue) info(now time.Time) FlowInfo {
	e := q.key.Effective()
	return FlowInfo{
		Key: q.id.key, WaitListSize: q.waiting.Len(),
		ParallelismMax: e.Parallelism, ParallelismCount: q.key.InFlight,
		RateMax: e.Rate, RateCount: q.key.Window.Count(now, e.Period), RatePeriod: e.Period,
		RatePeriodStart: q.key.Window.Oldest(now, e.Period),
		Paused:          q.key.Paused, PinnedParallelism: q.key.Pins.Parallelism > 0, PinnedRate: q.key.Pins.Rate > 0,
	}
}

// FlowKeys lists a project's keys the scheduler holds state for (waiting, in flight,
// within a rate window, or configured) whose names contain search, sorted by name.
func (s *Scheduler) FlowKeys(project, search string, now time.Time) []FlowInfo {
	var out []FlowInfo
	for id, q := range s.flow.queues {
		if id.project == project && id.key != "" && strings.Contains(id.key, search) {
			out = append(out, q.info(now))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// FlowKey returns one key's state; a key never seen is idle with no limits.
func (s *Scheduler) FlowKey(project, key string, now time.Time) FlowInfo {
	if q := s.flow.queues[flowID{project, key}]; q != nil {
		return q.info(now)
	}
	return FlowInfo{Key: key, RatePeriod: flowctl.DefaultPeriod}
}

// ProjectInFlight is the number of a project's deliveries in flight.
func (s *Scheduler) ProjectInFlight(project string) int { return s.flow.inFlight[project] }

// ProjectCeiling is the configured ceiling of every project (0: none).
func (s *Scheduler) ProjectCeiling() int { return s.cfg.ProjectCeiling }

// WaitReason says why a pending delivery has not started: the constraint its
// waitlist's head waits for (or that earlier deliveries of its key are ahead of it) and
// since when it waits. ok is false when it is not in a waitlist.
func (s *Scheduler) WaitReason(e storage.DueEntry) (reason string, since time.Time, ok bool) {
	q := s.flow.queues[flowID{e.Project, e.FlowKey}]
	if q == nil {
		return "", time.Time{}, false
	}
	item, found := q.waiting.Get(newWaitItem(e, time.Time{}))
	if !found {
		return "", time.Time{}, false
	}
	reason = q.blockedBy
	if head, _ := q.waiting.Min(); head.id != item.id {
		reason = fmt.Sprintf("queued behind earlier deliveries of key %q (%d waiting); the first waits for %s", q.id.key, q.waiting.Len(), q.blockedBy)
	}
	return reason, time.Unix(0, item.since), true
}

// KeySettings are an operator's durable settings of a key.
type KeySettings struct {
	Paused bool
	Pins   flowctl.Pins
}

// ChangeKey applies an operator change to a key and starts what the change allows. It
// returns the key's settings after the change (to be stored) and the starts.
func (s *Scheduler) ChangeKey(project, key string, change func(*flowctl.Key), now time.Time) (KeySettings, []Start) {
	q := s.queue(flowID{project, key})
	change(q.key)
	var starts []Start
	s.pump(q, now, -1, time.Time{}, &starts)
	settings := KeySettings{Paused: q.key.Paused, Pins: q.key.Pins}
	s.evictIfIdle(q, now)
	return settings, starts
}

// RestoreKey gives a key what it must remember across restarts: its recent rate starts
// (nil: none) and its operator settings (nil: none).
func (s *Scheduler) RestoreKey(project, key string, starts []int64, settings *KeySettings) {
	k := s.queue(flowID{project, key}).key
	if starts != nil {
		k.Window.Restore(starts)
	}
	if settings != nil {
		k.Paused, k.Pins = settings.Paused, settings.Pins
	}
}

// KeySettings returns what a key's settings would be after change, without applying it
// (so the caller can store them first).
func (s *Scheduler) KeySettings(project, key string, change func(*flowctl.Key)) KeySettings {
	probe := flowctl.NewKey(key)
	if q := s.flow.queues[flowID{project, key}]; q != nil {
		probe.Paused, probe.Pins = q.key.Paused, q.key.Pins
	}
	change(probe)
	return KeySettings{Paused: probe.Paused, Pins: probe.Pins}
}

// HoldsKey reports whether the scheduler holds state for a project's flow-control key
// (deliveries waiting or in flight, a rate window, an operator's setting).
func (s *Scheduler) HoldsKey(project, key string) bool {
	_, ok := s.flow.queues[flowID{project, key}]
	if !ok {
		_, ok = s.flow.extra[flowID{project, key}]
	}
	return ok
}

// KeyCount is the number of flow-control keys the scheduler holds for a project.
func (s *Scheduler) KeyCount(project string) int { return s.flow.keys[project] }
