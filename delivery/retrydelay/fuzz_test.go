package retrydelay_test

import (
	"math"
	"testing"

	"github.com/duraton/duraton/delivery/retrydelay"
)

// FuzzParse checks that Parse and Eval never panic on arbitrary input, that String
// round-trips through Parse to an equivalent expression, and that Delay always lands
// in [0, MaxDelay].
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"1000 * (1 + retried)",
		"pow(2, retried) * 1000",
		"max(1000, min(5000, retried*100))",
		"floor(exp(2.5 * (retried + 1))) * 1000",
		"-(-retried) % 3 / 0.5e1",
		"round(sqrt(abs(ceil(-1.5))))",
		"((((((((((1))))))))))",
		"1/0", "exp(1e308)", "", "(", "retried(", "max(,)", "1e", ".",
	} {
		f.Add(seed, 3)
	}

	f.Fuzz(func(t *testing.T, src string, retried int) {
		e, err := retrydelay.Parse(src)
		if err != nil {
			if e != nil {
				t.Fatalf("Parse(%q) returned both an Expr and %v", src, err)
			}
			return
		}
		if e.String() != src {
			t.Fatalf("String() = %q, want %q", e.String(), src)
		}
		v1, err1 := e.Eval(retried)
		again, err := retrydelay.Parse(e.String())
		if err != nil {
			t.Fatalf("reparse of %q: %v", src, err)
		}
		v2, err2 := again.Eval(retried)
		if (err1 == nil) != (err2 == nil) || (err1 == nil && v1 != v2) {
			t.Fatalf("reparse of %q disagrees: %v,%v vs %v,%v", src, v1, err1, v2, err2)
		}
		if err1 == nil && (math.IsNaN(v1) || math.IsInf(v1, 0)) {
			t.Fatalf("Eval(%q) = %v without error", src, v1)
		}
		if d := retrydelay.Delay(e, retried); d < 0 || d > retrydelay.MaxDelay {
			t.Fatalf("Delay(%q, %d) = %v out of range", src, retried, d)
		}
	})
}
