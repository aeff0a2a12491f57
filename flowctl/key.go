package flowctl

import "time"

// Limits is what one delivery asks of its key.
type Limits struct {
	Parallelism int
	Rate        int
	Period      time.Duration
}

// LimitsOf extracts a configuration's limits.
func LimitsOf(c Config) Limits {
	p := c.Period
	if p <= 0 {
		p = DefaultPeriod
	}
	return Limits{Parallelism: c.Parallelism, Rate: c.Rate, Period: p}
}

// Pins fix a key's limits regardless of what its deliveries ask (the management API's pin).
type Pins struct {
	Parallelism int           `json:"parallelism,omitempty"`
	Rate        int           `json:"rate,omitempty"`
	Period      time.Duration `json:"period,omitempty"`
}

// Key is the state of one flow-control key: its slots in use, its start window, the
// limits its deliveries ask for, and the operator's pause and pins.
type Key struct {
	Name     string
	InFlight int
	Paused   bool
	Pins     Pins
	Window   Window

	asks map[Limits]int // limits asked by the deliveries waiting or in flight, with counts
}

// NewKey returns an idle key.
func NewKey(name string) *Key { return &Key{Name: name, asks: map[Limits]int{}} }

// Ask registers a delivery (waiting or in flight) asking for l.
func (k *Key) Ask(l Limits) {
	if k.asks == nil {
		k.asks = map[Limits]int{}
	}
	k.asks[l]++
}

// Unask removes a delivery registered with Ask; limits never asked are ignored.
func (k *Key) Unask(l Limits) {
	if k.asks[l] <= 1 {
		delete(k.asks, l)
		return
	}
	k.asks[l]--
}

// Asking is the number of deliveries registered with Ask.
func (k *Key) Asking() int {
	n := 0
	for _, c := range k.asks {
		n += c
	}
	return n
}

// Effective is the limits in force: a pinned value where pinned, else the highest asked
// by the deliveries waiting or in flight (docs/protocol.md, "Flow control").
// The period goes with the highest rate.
func (k *Key) Effective() Limits {
	var e Limits
	for l := range k.asks {
		e.Parallelism = max(e.Parallelism, l.Parallelism)
		if l.Rate > e.Rate || (l.Rate == e.Rate && l.Period < e.Period) {
			e.Rate, e.Period = l.Rate, l.Period
		}
	}
	if k.Pins.Parallelism > 0 {
		e.Parallelism = k.Pins.Parallelism
	}
	if k.Pins.Rate > 0 {
		e.Rate, e.Period = k.Pins.Rate, k.Pins.Period
	}
	if e.Period <= 0 {
		e.Period = DefaultPeriod
	}
	return e
}

// Idle reports whether the key holds nothing worth keeping in memory. Recent starts are
// worth keeping even when no delivery asks any more: a key dropped with them would admit
// a new delivery against an empty window and break the rate.
func (k *Key) Idle(now time.Time) bool {
	return k.InFlight == 0 && len(k.asks) == 0 && !k.Paused && k.Pins == (Pins{}) &&
		!k.Window.matters(now, k.Effective().Period)
}
