package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // CRON_TZ must not depend on the host's zoneinfo

	"github.com/robfig/cron/v3"
)

// MaxCronLen caps an Upstash-Cron value.
const MaxCronLen = 256

// MinInterval is the shortest @every interval accepted; the five-field form cannot go
// below a minute either.
const MinInterval = time.Minute

// ErrBadCron is wrapped by every cron validation error.
var ErrBadCron = errors.New("invalid cron expression")

// ParseCron parses and validates an Upstash-Cron value.
func ParseCron(expr string) (cron.Schedule, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case expr == "":
		return nil, fmt.Errorf("%w: empty", ErrBadCron)
	case len(expr) > MaxCronLen:
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadCron, MaxCronLen)
	}
	c, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCron, err)
	}
	if every, ok := c.(cron.ConstantDelaySchedule); ok && every.Delay < MinInterval {
		return nil, fmt.Errorf("%w: @every must be at least %s", ErrBadCron, MinInterval)
	}
	if !occurs(c) {
		return nil, fmt.Errorf("%w: %q names a date that never occurs (such as 30 February or 31 April)", ErrBadCron, expr)
	}
	return c, nil
}

// occursFrom is where occurs looks for a tick: a leap year, so 29 February is found.
var occursFrom = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// occurs reports whether c ever fires. A five-field schedule repeats with the calendar,
// and the parser looks five years ahead, which covers every day of every month from a
// leap year on; a schedule that finds no tick there names days its months never have.
func occurs(c cron.Schedule) bool {
	return !c.Next(occursFrom).IsZero()
}

// nextTick is the first tick of c after now. last is the tick that just fired (zero:
// none): under a time zone, the same local time again (the hour repeated when daylight
// saving ends) is the same tick and is skipped.
func nextTick(c cron.Schedule, now, last time.Time) time.Time {
	n := c.Next(now)
	spec, ok := c.(*cron.SpecSchedule)
	if !ok || last.IsZero() || n.IsZero() {
		return n
	}
	const wall = "2006-01-02 15:04:05"
	if n.In(spec.Location).Format(wall) == last.In(spec.Location).Format(wall) {
		n = c.Next(n)
	}
	return n
}
