package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimitsOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, Limits{Parallelism: 2, Rate: 3, Period: time.Minute}, LimitsOf(Config{Key: "k", Parallelism: 2, Rate: 3, Period: time.Minute}))
	require.Equal(t, Limits{Parallelism: 2, Period: DefaultPeriod}, LimitsOf(Config{Key: "k", Parallelism: 2}))
}

func TestKeyEffective(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		asks []Limits
		pins Pins
		want Limits
	}{
		{name: "MaxOfAsks", asks: []Limits{
			{Parallelism: 1, Rate: 5, Period: time.Second},
			{Parallelism: 4, Rate: 2, Period: time.Second},
			{Parallelism: 2, Period: time.Second},
		}, want: Limits{Parallelism: 4, Rate: 5, Period: time.Second}},
		{name: "NoAsks", want: Limits{Period: DefaultPeriod}},
		{name: "PeriodGoesWithHighestRate", asks: []Limits{
			{Rate: 2, Period: time.Second},
			{Rate: 10, Period: time.Minute},
		}, want: Limits{Rate: 10, Period: time.Minute}},
		{name: "PinOverridesLowerAndHigherAsks", asks: []Limits{
			{Parallelism: 1, Rate: 1, Period: time.Second},
			{Parallelism: 9, Rate: 9, Period: time.Second},
		}, pins: Pins{Parallelism: 3, Rate: 4, Period: time.Hour}, want: Limits{Parallelism: 3, Rate: 4, Period: time.Hour}},
		{name: "PinParallelismOnly", asks: []Limits{
			{Parallelism: 1, Rate: 5, Period: 2 * time.Second},
		}, pins: Pins{Parallelism: 7}, want: Limits{Parallelism: 7, Rate: 5, Period: 2 * time.Second}},
		{name: "PinPeriodWithoutRateIgnored", asks: []Limits{
			{Rate: 5, Period: 2 * time.Second},
		}, pins: Pins{Period: time.Hour}, want: Limits{Rate: 5, Period: 2 * time.Second}},
		{name: "PinRateDefaultPeriod", pins: Pins{Rate: 5}, want: Limits{Rate: 5, Period: DefaultPeriod}},
		{name: "PinRateOnly", asks: []Limits{
			{Parallelism: 2, Rate: 5, Period: 2 * time.Second},
		}, pins: Pins{Rate: 1, Period: time.Minute}, want: Limits{Parallelism: 2, Rate: 1, Period: time.Minute}},
		{name: "Single", asks: []Limits{{Parallelism: 2, Rate: 3, Period: 5 * time.Second}}, want: Limits{Parallelism: 2, Rate: 3, Period: 5 * time.Second}},
		{name: "TieOnRateTakesShorterPeriod", asks: []Limits{
			{Rate: 3, Period: time.Minute},
			{Rate: 3, Period: time.Second},
			{Rate: 3, Period: time.Hour},
		}, want: Limits{Rate: 3, Period: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := NewKey("k")
			for _, l := range tt.asks {
				k.Ask(l)
			}
			k.Pins = tt.pins
			require.Equal(t, tt.want, k.Effective())
			require.Equal(t, len(tt.asks), k.Asking())
		})
	}
}

func TestKeyUnask(t *testing.T) {
	t.Parallel()
	low := Limits{Parallelism: 1, Rate: 1, Period: time.Second}
	high := Limits{Parallelism: 5, Rate: 5, Period: 3 * time.Second}

	k := NewKey("k")
	k.Ask(low)
	k.Ask(high)
	k.Ask(high)
	require.Equal(t, 3, k.Asking())
	require.Equal(t, high, k.Effective())

	k.Unask(high)
	require.Equal(t, high, k.Effective(), "one delivery still asks high")
	k.Unask(high)
	require.Equal(t, low, k.Effective(), "the effective limit falls back when the high ask leaves")
	require.Equal(t, 1, k.Asking())

	k.Unask(high) // never asked any more: ignored
	require.Equal(t, 1, k.Asking())
	require.Equal(t, low, k.Effective())

	k.Unask(low)
	require.Equal(t, 0, k.Asking())
	require.Equal(t, Limits{Period: DefaultPeriod}, k.Effective())

	k.Ask(low)
	require.Equal(t, 1, k.Asking(), "an extra Unask left no negative count behind")
}

func TestKeyZeroValue(t *testing.T) {
	t.Parallel()
	var k Key
	k.Unask(Limits{Rate: 1})
	k.Ask(Limits{Rate: 1, Period: time.Second})
	require.Equal(t, Limits{Rate: 1, Period: time.Second}, k.Effective())
	require.True(t, Admit(t0, Parallelism{&k}, Rate{&k}).Admitted)
}

func TestKeyIdle(t *testing.T) {
	t.Parallel()
	l := Limits{Rate: 2, Period: 5 * time.Second}
	tests := []struct {
		name string
		// setup runs at t0 on a new key.
		setup    func(k *Key)
		now      time.Duration
		wantIdle bool
	}{
		{name: "Asked", setup: func(k *Key) { k.Ask(l) }},
		{name: "InFlight", setup: func(k *Key) { k.InFlight = 1 }},
		{name: "New", wantIdle: true},
		{name: "Paused", setup: func(k *Key) { k.Paused = true }},
		{name: "Pinned", setup: func(k *Key) { k.Pins = Pins{Parallelism: 1} }},
		{
			// The window outlives the deliveries: forgetting it would let the next
			// delivery on the key start against an empty window.
			name:  "RecentStartAfterAllDone",
			setup: startAndFinish(l), now: 5*time.Second - time.Nanosecond,
		},
		{
			name:  "RecentStartLeftTheWindow",
			setup: startAndFinish(l), now: 5 * time.Second, wantIdle: true,
		},
		{
			name:  "RestoredStartsMatterUpToMaxPeriod",
			setup: func(k *Key) { k.Window.Restore([]int64{t0.UnixNano()}) }, now: MaxPeriod - time.Nanosecond,
		},
		{
			name:  "RestoredStartsOlderThanMaxPeriod",
			setup: func(k *Key) { k.Window.Restore([]int64{t0.UnixNano()}) }, now: MaxPeriod, wantIdle: true,
		},
		{
			name: "ResetWindow",
			setup: func(k *Key) {
				startAndFinish(l)(k)
				k.Window.Reset()
			},
			wantIdle: true,
		},
		{
			name: "StartUnderLongestPeriodCounts",
			setup: func(k *Key) {
				startAndFinish(l)(k)
				startAndFinish(Limits{Rate: 5, Period: time.Second})(k)
			},
			now: 4 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := NewKey("k")
			if tt.setup != nil {
				tt.setup(k)
			}
			require.Equal(t, tt.wantIdle, k.Idle(at(tt.now)))
		})
	}
}

// startAndFinish admits one delivery asking l at t0 and completes it.
func startAndFinish(l Limits) func(k *Key) {
	return func(k *Key) {
		k.Ask(l)
		if !Admit(t0, Parallelism{k}, Rate{k}).Admitted {
			panic("not admitted")
		}
		Release(Parallelism{k}, Rate{k})
		k.Unask(l)
	}
}

// The bug Idle guarded against: a key dropped as idle and recreated forgets its starts.
func TestKeyIdleKeepsRateAcrossRecreation(t *testing.T) {
	t.Parallel()
	l := Limits{Rate: 1, Period: 10 * time.Second}
	keys := map[string]*Key{}
	get := func(name string) *Key {
		if keys[name] == nil {
			keys[name] = NewKey(name)
		}
		return keys[name]
	}
	sweep := func(now time.Time) {
		for name, k := range keys {
			if k.Idle(now) {
				delete(keys, name)
			}
		}
	}

	startAndFinish(l)(get("k"))
	sweep(at(time.Second))

	k := get("k")
	k.Ask(l)
	d := Admit(at(2*time.Second), Parallelism{k}, Rate{k})
	require.False(t, d.Admitted, "one start per 10s: the start at t0 still counts")
	require.Equal(t, at(10*time.Second), d.RetryAt)
}
