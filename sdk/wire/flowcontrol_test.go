package wire

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFlowControlValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		want        FlowControlValue
		wantErr     string
	}{
		{name: "SDKForm", value: "parallelism=2, rate=5, period=1s", want: FlowControlValue{Parallelism: 2, Rate: 5, Period: time.Second}},
		{name: "NoSpaces", value: "parallelism=5,rate=10,period=1m", want: FlowControlValue{Parallelism: 5, Rate: 10, Period: time.Minute}},
		{name: "CaseAndAlias", value: "Parallelism=1, RatePerSecond=3", want: FlowControlValue{Parallelism: 1, Rate: 3}},
		{name: "BareSeconds", value: "rate=3,period=2", want: FlowControlValue{Rate: 3, Period: 2 * time.Second}},
		{name: "Days", value: "rate=3,period=1d", want: FlowControlValue{Rate: 3, Period: 24 * time.Hour}},
		{name: "GoDuration", value: "rate=3,period=1h30m", want: FlowControlValue{Rate: 3, Period: 90 * time.Minute}},
		{name: "EmptyItems", value: " , parallelism=1,, ", want: FlowControlValue{Parallelism: 1}},
		{name: "Empty", value: "", want: FlowControlValue{}},
		{name: "NotPair", value: "parallelism", wantErr: `item "parallelism" is not name=value`},
		{name: "Unknown", value: "burst=3", wantErr: `unknown item "burst"`},
		{name: "ZeroParallelism", value: "parallelism=0", wantErr: `parallelism="0": must be a positive integer`},
		{name: "NegativeRate", value: "rate=-1", wantErr: `rate="-1": must be a positive integer`},
		{name: "AliasNamedRate", value: "ratePerSecond=x", wantErr: `rate="x": not an integer`},
		{name: "PeriodZero", value: "rate=1,period=0", wantErr: `period="0": must be a positive duration`},
		{name: "PeriodNegative", value: "rate=1,period=-1s", wantErr: `period="-1s": must be a positive duration`},
		{name: "PeriodGarbage", value: "rate=1,period=soon", wantErr: "not a duration"},
		{name: "PeriodDaysOverflow", value: "rate=1,period=999999999d", wantErr: "must be a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFlowControlValue(tt.value)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrFlowControlValue)
				require.ErrorContains(t, err, HeaderFlowControlValue+" ")
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestFlowControlValueString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   FlowControlValue
		want string
	}{
		{FlowControlValue{Parallelism: 2, Rate: 5, Period: time.Minute}, "parallelism=2, rate=5, period=60s"},
		{FlowControlValue{Parallelism: 1}, "parallelism=1"},
		{FlowControlValue{Rate: 3, Period: 2 * time.Second}, "rate=3, period=2s"},
		{FlowControlValue{Parallelism: 1, Period: 5 * time.Second}, "parallelism=1, period=5s"},
		{FlowControlValue{Rate: 1, Period: 1500 * time.Millisecond}, "rate=1, period=1.5s"},
		{FlowControlValue{Parallelism: -1, Rate: 0, Period: -time.Second}, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.in.String(), "%+v", tt.in)
	}
}

// FuzzFlowControlValue checks that the parser never panics, and that whatever it accepts
// renders to a value it parses back to the same thing (the server renders what it parsed).
func FuzzFlowControlValue(f *testing.F) {
	for _, s := range []string{"parallelism=2, rate=5, period=1s", "rate=3,period=1d", "period=1h30m", "rate=1,period=1500ms", "x", ",,", "rate=9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseFlowControlValue(s)
		if err != nil {
			if !errors.Is(err, ErrFlowControlValue) {
				t.Fatalf("error %v does not wrap ErrFlowControlValue", err)
			}
			return
		}
		back, err := ParseFlowControlValue(v.String())
		if err != nil {
			t.Fatalf("%q parsed to %+v, which renders as %q, which does not parse: %v", s, v, v.String(), err)
		}
		if back != v {
			t.Fatalf("%q: %+v renders as %q, which parses to %+v", s, v, v.String(), back)
		}
	})
}
