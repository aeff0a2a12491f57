package retrydelay_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/retrydelay"
)

func TestBackoff(t *testing.T) {
	t.Parallel()

	tests := []struct {
		retried int
		want    time.Duration // truncated to want's precision
		round   time.Duration
	}{
		{retried: -1, want: 12182 * time.Millisecond, round: time.Millisecond}, // treated as 0
		{retried: 0, want: 12182 * time.Millisecond, round: time.Millisecond},  // e^2.5
		{retried: 1, want: 2*time.Minute + 28*time.Second, round: time.Second}, // e^5
		{retried: 2, want: 30*time.Minute + 8*time.Second, round: time.Second}, // e^7.5
		{retried: 3, want: 6*time.Hour + 7*time.Minute + 6*time.Second, round: time.Second},
		{retried: 4, want: 24 * time.Hour, round: time.Second}, // e^12.5 > 86400
		{retried: 100, want: 24 * time.Hour, round: time.Second},
		{retried: math.MaxInt, want: 24 * time.Hour, round: time.Second},
	}
	for _, tt := range tests {
		t.Run(time.Duration(tt.retried).String(), func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, retrydelay.Backoff(tt.retried).Truncate(tt.round))
		})
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		src     string // empty: no expression
		retried int
		want    time.Duration
	}{
		{name: "NoExpression", retried: 1, want: retrydelay.Backoff(1)},
		{name: "Linear", src: "1000 * (1 + retried)", retried: 2, want: 3 * time.Second},
		{name: "Fractional", src: "1.5", want: 1500 * time.Microsecond},
		{name: "Zero", src: "0", want: 0},
		{name: "NegativeClampedToZero", src: "-5000", want: 0},
		{name: "ClampedTo24h", src: "1e12", want: 24 * time.Hour},
		{name: "Exactly24h", src: "86400000", want: 24 * time.Hour},
		{name: "HugeButFinite", src: "1e308", want: 24 * time.Hour},
		{name: "DivisionByZeroFallsBack", src: "1/0", retried: 2, want: retrydelay.Backoff(2)},
		{name: "RetriedDivisionByZeroFallsBack", src: "1000/retried", retried: 0, want: retrydelay.Backoff(0)},
		{name: "NaNFallsBack", src: "sqrt(-1)", retried: 1, want: retrydelay.Backoff(1)},
		{name: "OverflowFallsBack", src: "exp(1e308)", want: retrydelay.Backoff(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			var e *retrydelay.Expr
			if tt.src != "" {
				var err error
				e, err = retrydelay.Parse(tt.src)
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, retrydelay.Delay(e, tt.retried))
		})
	}
}
