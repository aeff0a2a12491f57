package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keyWith returns a key asked for l by one delivery.
func keyWith(name string, l Limits) *Key {
	k := NewKey(name)
	k.Ask(l)
	return k
}

type admitState struct {
	InFlight, CeilingInFlight int
	Starts                    []int64
}

func stateOf(k *Key, c *Ceiling) admitState {
	return admitState{InFlight: k.InFlight, CeilingInFlight: c.InFlight, Starts: k.Window.Starts()}
}

func TestAdmit(t *testing.T) {
	t.Parallel()

	type bundle struct {
		key, other *Key
		ceiling    *Ceiling
	}
	tests := []struct {
		name        string
		limits      Limits
		ceiling     int
		setup       func(t *testing.T, b bundle) // runs at t0
		now         time.Duration
		wantBlocked string // BlockedBy.String(); "" = admitted
		wantRetry   time.Duration
	}{
		{
			name:   "AdmittedTakesAll",
			limits: Limits{Parallelism: 2, Rate: 2, Period: time.Second}, ceiling: 3,
		},
		{
			name:   "CeilingBlocksSpendsNothingOnKey",
			limits: Limits{Parallelism: 2, Rate: 2, Period: time.Second}, ceiling: 1,
			setup: func(t *testing.T, b bundle) {
				require.True(t, Admit(t0, Parallelism{b.other}, Rate{b.other}, b.ceiling).Admitted)
			},
			wantBlocked: "ceiling(project=p) <= 1",
		},
		{
			name:   "NoLimitsAdmits",
			limits: Limits{Period: time.Second},
		},
		{
			name:   "ParallelismBlocksUntilRelease",
			limits: Limits{Parallelism: 1, Rate: 5, Period: time.Second},
			setup: func(t *testing.T, b bundle) {
				require.True(t, Admit(t0, Parallelism{b.key}, Rate{b.key}, b.ceiling).Admitted)
			},
			now:         10 * time.Second,
			wantBlocked: "parallelism(key=k) <= 1",
		},
		{
			name:   "PausedBlocksWithRoom",
			limits: Limits{Parallelism: 5, Period: time.Second},
			setup: func(t *testing.T, b bundle) {
				b.key.Paused = true
			},
			wantBlocked: "paused(key=k)",
		},
		{
			name:   "PausedBlocksWithoutParallelismLimit",
			limits: Limits{Rate: 5, Period: time.Second},
			setup: func(t *testing.T, b bundle) {
				b.key.Paused = true
			},
			wantBlocked: "paused(key=k)",
		},
		{
			name:   "RateBlocksWithParallelismRoom",
			limits: Limits{Parallelism: 3, Rate: 1, Period: 2 * time.Second}, ceiling: 5,
			setup: func(t *testing.T, b bundle) {
				require.True(t, Admit(t0, Parallelism{b.key}, Rate{b.key}, b.ceiling).Admitted)
			},
			now:         time.Second,
			wantBlocked: "rate(key=k) <= 1 per 2s",
			wantRetry:   2 * time.Second,
		},
		{
			name:   "RateFreesExactlyAtPeriod",
			limits: Limits{Parallelism: 3, Rate: 1, Period: 2 * time.Second},
			setup: func(t *testing.T, b bundle) {
				require.True(t, Admit(t0, Parallelism{b.key}, Rate{b.key}, b.ceiling).Admitted)
			},
			now: 2 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := bundle{
				key:     keyWith("k", tt.limits),
				other:   keyWith("o", Limits{Parallelism: 1, Period: time.Second}),
				ceiling: &Ceiling{Scope: "p", Limit: tt.ceiling},
			}
			if tt.setup != nil {
				tt.setup(t, b)
			}
			now := at(tt.now)
			before := stateOf(b.key, b.ceiling)
			otherBefore := stateOf(b.other, b.ceiling)
			d := Admit(now, Parallelism{b.key}, Rate{b.key}, b.ceiling)

			if tt.wantBlocked != "" {
				require.False(t, d.Admitted)
				require.NotNil(t, d.BlockedBy)
				require.Equal(t, tt.wantBlocked, d.BlockedBy.String())
				if tt.wantRetry == 0 {
					require.True(t, d.RetryAt.IsZero())
				} else {
					require.Equal(t, at(tt.wantRetry), d.RetryAt)
				}
				require.Equal(t, before, stateOf(b.key, b.ceiling), "a blocked admission spends nothing")
				require.Equal(t, otherBefore, stateOf(b.other, b.ceiling))
				return
			}
			require.Equal(t, Decision{Admitted: true}, d)
			want := before
			want.InFlight++
			want.CeilingInFlight++
			if tt.limits.Rate > 0 {
				want.Starts = append(want.Starts, now.UnixNano())
				if len(want.Starts) > tt.limits.Rate {
					want.Starts = want.Starts[len(want.Starts)-tt.limits.Rate:]
				}
			}
			require.Equal(t, want, stateOf(b.key, b.ceiling))

			Release(Parallelism{b.key}, Rate{b.key}, b.ceiling)
			require.Equal(t, before.InFlight, b.key.InFlight)
			require.Equal(t, before.CeilingInFlight, b.ceiling.InFlight)
			require.Equal(t, want.Starts, b.key.Window.Starts(), "a release does not give back a start")
		})
	}
}

// A key that is both at its parallelism and over its rate reports the first constraint in
// the order given, and spends nothing on the ones after it.
func TestAdmitReportsFirstBlocker(t *testing.T) {
	t.Parallel()
	k := keyWith("k", Limits{Parallelism: 1, Rate: 1, Period: time.Second})
	c := &Ceiling{Scope: "p", Limit: 10}
	require.True(t, Admit(t0, Parallelism{k}, Rate{k}, c).Admitted)

	d := Admit(t0, Parallelism{k}, Rate{k}, c)
	require.Equal(t, Parallelism{k}, d.BlockedBy)
	require.True(t, d.RetryAt.IsZero())

	d = Admit(t0, Rate{k}, Parallelism{k}, c)
	require.Equal(t, Rate{k}, d.BlockedBy)
	require.Equal(t, at(time.Second), d.RetryAt)
	require.Equal(t, 1, k.InFlight)
	require.Equal(t, 1, c.InFlight)
}

func TestAdmitNoConstraints(t *testing.T) {
	t.Parallel()
	require.Equal(t, Decision{Admitted: true}, Admit(t0))
	Release()
}

func TestCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		limit     int
		admits    int // admissions attempted
		wantTaken int
	}{
		{name: "AtLimit", limit: 3, admits: 5, wantTaken: 3},
		{name: "Negative", limit: -1, admits: 5, wantTaken: 5},
		{name: "One", limit: 1, admits: 3, wantTaken: 1},
		{name: "Unlimited", limit: 0, admits: 50, wantTaken: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Ceiling{Scope: "p", Limit: tt.limit}
			taken := 0
			for i := range tt.admits {
				// Every admission on its own key, so only the ceiling can block.
				k := keyWith("k", Limits{Parallelism: 1, Period: time.Second})
				d := Admit(at(time.Duration(i)), Parallelism{k}, c)
				if d.Admitted {
					taken++
					continue
				}
				require.Equal(t, 0, k.InFlight, "the key's slot is not taken when the ceiling blocks")
				require.Same(t, c, d.BlockedBy)
				require.True(t, d.RetryAt.IsZero())
			}
			require.Equal(t, tt.wantTaken, taken)
			require.Equal(t, tt.wantTaken, c.InFlight)

			for range tt.wantTaken + 2 {
				c.Release()
			}
			require.Equal(t, 0, c.InFlight, "release never goes below zero")
		})
	}
}

func TestParallelism(t *testing.T) {
	t.Parallel()
	k := keyWith("k", Limits{Parallelism: 2, Period: time.Second})
	p := Parallelism{k}
	for range 2 {
		ok, _ := p.Check(t0)
		require.True(t, ok)
		p.Take(t0)
	}
	ok, retry := p.Check(t0)
	require.False(t, ok)
	require.True(t, retry.IsZero())

	p.Release()
	ok, _ = p.Check(t0)
	require.True(t, ok)

	p.Release()
	p.Release()
	require.Equal(t, 0, k.InFlight, "release never goes below zero")

	// Unset parallelism is unlimited.
	u := Parallelism{keyWith("u", Limits{Rate: 1, Period: time.Second})}
	for range 100 {
		u.Take(t0)
	}
	ok, _ = u.Check(t0)
	require.True(t, ok)
	require.Equal(t, "parallelism(key=u) <= 0", u.String())
}

func TestRateFollowsEffectiveLimits(t *testing.T) {
	t.Parallel()
	k := NewKey("k")
	r := Rate{k}

	// No rate asked: nothing is recorded.
	k.Ask(Limits{Parallelism: 1, Period: time.Second})
	r.Take(t0)
	require.Empty(t, k.Window.Starts())

	// A rate of 1 per 2s arrives with another delivery.
	l := Limits{Rate: 1, Period: 2 * time.Second}
	k.Ask(l)
	require.True(t, Admit(t0, r).Admitted)
	d := Admit(at(time.Second), r)
	require.False(t, d.Admitted)
	require.Equal(t, at(2*time.Second), d.RetryAt)

	// A pin raises the rate at once.
	k.Pins = Pins{Rate: 2, Period: 2 * time.Second}
	require.True(t, Admit(at(time.Second), r).Admitted)
	require.False(t, Admit(at(time.Second), r).Admitted)
	require.Equal(t, "rate(key=k) <= 2 per 2s", r.String())

	// Unpinned, the asked rate of 1 is in force again: both starts must leave.
	k.Pins = Pins{}
	d = Admit(at(2*time.Second), r)
	require.False(t, d.Admitted)
	require.Equal(t, at(3*time.Second), d.RetryAt)
	require.True(t, Admit(at(3*time.Second), r).Admitted)
}
