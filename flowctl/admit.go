package flowctl

import (
	"strconv"
	"time"
)

// Constraint is one limit in one scope. Check must not change anything; Take and Release
// move the state.
type Constraint interface {
	// Check reports whether the constraint has room at now. When it has not, retryAt is
	// when it will (a rate window), or zero when it waits for a Release.
	Check(now time.Time) (ok bool, retryAt time.Time)
	// Take spends the room Check found.
	Take(now time.Time)
	// Release returns a slot taken by Take (no-op for constraints without slots).
	Release()
	// String names the constraint for "why it waits" answers.
	String() string
}

// Decision is the result of an admission.
type Decision struct {
	Admitted  bool
	BlockedBy Constraint // the first constraint without room
	RetryAt   time.Time  // when BlockedBy may admit again; zero: on a release
}

// Admit checks every constraint and, only if all have room, takes them all. A blocked
// admission changes nothing.
func Admit(now time.Time, cs ...Constraint) Decision {
	for _, c := range cs {
		if ok, at := c.Check(now); !ok {
			return Decision{BlockedBy: c, RetryAt: at}
		}
	}
	for _, c := range cs {
		c.Take(now)
	}
	return Decision{Admitted: true}
}

// Release returns the slots of an admitted delivery.
func Release(cs ...Constraint) {
	for _, c := range cs {
		c.Release()
	}
}

// Parallelism is the slot constraint of a key.
type Parallelism struct{ K *Key }

func (p Parallelism) Check(time.Time) (bool, time.Time) {
	if p.K.Paused {
		return false, time.Time{}
	}
	limit := p.K.Effective().Parallelism
	return limit <= 0 || p.K.InFlight < limit, time.Time{}
}
func (p Parallelism) Take(time.Time) { p.K.InFlight++ }
func (p Parallelism) Release() {
	if p.K.InFlight > 0 {
		p.K.InFlight--
	}
}
func (p Parallelism) String() string {
	if p.K.Paused {
		return "paused(key=" + p.K.Name + ")"
	}
	return "parallelism(key=" + p.K.Name + ") <= " + strconv.Itoa(p.K.Effective().Parallelism)
}

// Rate is the sliding-window start constraint of a key.
type Rate struct{ K *Key }

func (r Rate) Check(now time.Time) (bool, time.Time) {
	e := r.K.Effective()
	return r.K.Window.Allows(now, e.Rate, e.Period)
}
func (r Rate) Take(now time.Time) {
	if e := r.K.Effective(); e.Rate > 0 {
		r.K.Window.Take(now, e.Rate)
		r.K.Window.span = max(r.K.Window.span, e.Period)
	}
}
func (r Rate) Release() {}
func (r Rate) String() string {
	e := r.K.Effective()
	return "rate(key=" + r.K.Name + ") <= " + strconv.Itoa(e.Rate) + " per " + e.Period.String()
}

// Ceiling is a project-wide slot limit over every delivery of the project (0 = none).
type Ceiling struct {
	Scope    string
	Limit    int
	InFlight int
}

func (c *Ceiling) Check(time.Time) (bool, time.Time) {
	return c.Limit <= 0 || c.InFlight < c.Limit, time.Time{}
}
func (c *Ceiling) Take(time.Time) { c.InFlight++ }
func (c *Ceiling) Release() {
	if c.InFlight > 0 {
		c.InFlight--
	}
}
func (c *Ceiling) String() string {
	return "ceiling(project=" + c.Scope + ") <= " + strconv.Itoa(c.Limit)
}
