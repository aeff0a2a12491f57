package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, key, value string
		want             Config
		wantErr          string
	}{
		{name: "SDKForm", key: "vendor", value: "parallelism=2, rate=5, period=1s", want: Config{Key: "vendor", Parallelism: 2, Rate: 5, Period: time.Second}},
		{name: "NoSpaces", key: "k", value: "parallelism=5,rate=10,period=1m", want: Config{Key: "k", Parallelism: 5, Rate: 10, Period: time.Minute}},
		{name: "BareSeconds", key: "k", value: "rate=3,period=2", want: Config{Key: "k", Rate: 3, Period: 2 * time.Second}},
		{name: "Days", key: "k", value: "rate=3,period=1d", want: Config{Key: "k", Rate: 3, Period: 24 * time.Hour}},
		{name: "GoDuration", key: "k", value: "rate=3,period=1h30m", want: Config{Key: "k", Rate: 3, Period: 90 * time.Minute}},
		{name: "DefaultPeriod", key: "k", value: "parallelism=1", want: Config{Key: "k", Parallelism: 1, Period: time.Second}},
		{name: "MissingKey", key: "", value: "parallelism=1", wantErr: "Upstash-Flow-Control-Key is required"},
		{name: "BadKey", key: "a b", value: "parallelism=1", wantErr: "must match"},
		{name: "Empty", key: "k", value: "", wantErr: "needs parallelism or rate"},
		{name: "OnlyPeriod", key: "k", value: "period=1s", wantErr: "needs parallelism or rate"},
		{name: "NotPair", key: "k", value: "parallelism", wantErr: `item "parallelism" is not name=value`},
		{name: "Unknown", key: "k", value: "burst=3", wantErr: `unknown item "burst"`},
		{name: "ZeroParallelism", key: "k", value: "parallelism=0", wantErr: "parallelism=\"0\": must be between"},
		{name: "NegativeRate", key: "k", value: "rate=-1", wantErr: "rate=\"-1\": must be between"},
		{name: "PeriodTooLong", key: "k", value: "rate=1,period=8d", wantErr: "period=\"8d\""},
		{name: "PeriodGarbage", key: "k", value: "rate=1,period=soon", wantErr: "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.key, tt.value)
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

func TestConfigValue(t *testing.T) {
	t.Parallel()
	require.Equal(t, "parallelism=2, rate=5, period=60s", Config{Key: "k", Parallelism: 2, Rate: 5, Period: time.Minute}.Value())
	require.Equal(t, "parallelism=1", Config{Key: "k", Parallelism: 1, Period: time.Second}.Value())
}
