package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The value format ("parallelism=2, rate=5, period=1s") is parsed by sdk/wire; its tests
// are there. These cover the limits flowctl judges.
func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key         string
		parallelism, rate int
		period            time.Duration
		want              Config
		wantErr           string
	}{
		{name: "All", key: "vendor", parallelism: 2, rate: 5, period: time.Second, want: Config{Key: "vendor", Parallelism: 2, Rate: 5, Period: time.Second}},
		{name: "DefaultPeriod", key: "k", parallelism: 1, want: Config{Key: "k", Parallelism: 1, Period: time.Second}},
		{name: "TrimmedKey", key: " k ", rate: 3, period: time.Minute, want: Config{Key: "k", Rate: 3, Period: time.Minute}},
		{name: "Maxima", key: "k", parallelism: MaxParallelism, rate: MaxRate, period: MaxPeriod, want: Config{Key: "k", Parallelism: MaxParallelism, Rate: MaxRate, Period: MaxPeriod}},
		{name: "MissingKey", key: "", parallelism: 1, wantErr: "Upstash-Flow-Control-Key is required"},
		{name: "BadKey", key: "a b", parallelism: 1, wantErr: "must match"},
		{name: "LongKey", key: string(make([]byte, MaxKeyLen+1)), parallelism: 1, wantErr: "must match"},
		{name: "Nothing", key: "k", wantErr: "needs parallelism or rate"},
		{name: "OnlyPeriod", key: "k", period: time.Second, wantErr: "needs parallelism or rate"},
		{name: "ParallelismTooLarge", key: "k", parallelism: MaxParallelism + 1, wantErr: "parallelism=1000001: must be between"},
		{name: "NegativeRate", key: "k", rate: -1, wantErr: "rate=-1: must be between"},
		{name: "PeriodTooLong", key: "k", rate: 1, period: 8 * 24 * time.Hour, wantErr: "period=192h0m0s: must be between"},
		{name: "PeriodTooShort", key: "k", rate: 1, period: time.Millisecond, wantErr: "period=1ms: must be between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := New(tt.key, tt.parallelism, tt.rate, tt.period)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCheckKey(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckKey("a-Z_0.9"))
	for _, bad := range []string{"", "a/b", "é", "a b"} {
		require.ErrorIs(t, CheckKey(bad), ErrInvalid, bad)
	}
}
