package native

import (
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// Delayed events (docs/protocol.md, "Native workflows"): an event sent with "ts" (unix ms) or
// "delay" (a duration such as "90s") in the future is stored with a timer of the flusher
// (storage/native_timers.go) and acknowledged at once; the flusher fans it out when it
// is due, in the transaction that removes its timer, so it fans out once, across
// restarts too. Its dedupeId is taken when it is accepted.

// MaxEventDelay is how far ahead an event may be scheduled.
const MaxEventDelay = 365 * 24 * time.Hour

// parseDelay checks an event's ts and delay (at most one) into in; now is the clock.
func parseDelay(who string, ts *int64, delay *string, in *EventIn, now time.Time) error {
	switch {
	case ts != nil && delay != nil:
		return invalid("%s: give \"ts\" or \"delay\", not both", who)
	case ts != nil:
		if *ts <= 0 {
			return invalid("%s.ts: want a time in unix milliseconds, got %d", who, *ts)
		}
		if limit := now.Add(MaxEventDelay).UnixMilli(); *ts > limit {
			return invalid("%s.ts: %d is more than 365 days ahead (the latest now is %d)", who, *ts, limit)
		}
		in.Ts = *ts
	case delay != nil:
		d, err := time.ParseDuration(*delay)
		switch {
		case err != nil:
			return invalid("%s.delay: want a duration such as \"90s\", \"15m\" or \"36h\", got %q", who, *delay)
		case d <= 0 || d > MaxEventDelay:
			return invalid("%s.delay: want a duration above 0 and at most %s (365 days), got %q", who, MaxEventDelay, *delay)
		}
		in.Delay = d
	}
	return nil
}

// scheduledFor is when in fans out (unix ms) and whether that is later than now. A ts
// not after now is an event for now.
func scheduledFor(in EventIn, now time.Time) (int64, bool) {
	switch {
	case in.Delay > 0:
		return now.Add(in.Delay).UnixMilli(), true
	case in.Ts > now.UnixMilli():
		return in.Ts, true
	}
	return 0, false
}

// fireDelayedTx fans out a due delayed event and stores it with its runs.
func (s *Service) fireDelayedTx(n *delivery.NativeTx, project string, nt storage.NativeTimer) ([]EventRun, error) {
	if err := n.Tx.DeleteNativeTimer(project, nt); err != nil {
		return nil, err
	}
	ev := *nt.Event
	ev.Pending, ev.Runs = false, []EventRun{}
	if err := s.fanOutTx(n, project, &ev); err != nil {
		return nil, fmt.Errorf("delayed event %s: %w", ev.ID, err)
	}
	return ev.Runs, nil
}
