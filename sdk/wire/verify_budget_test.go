package wire_test

import (
	"testing"
	"time"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// TestVerifyAllocationBudget: checking a delivery's signature as the server makes it
// (the fast path, claims decoded by hand) stays within a handful of allocations.
func TestVerifyAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`[{"messageId":"m","body":"e30=","callType":"step"}]`)
	tok, err := wire.Sign("sig_current", wire.NewClaims("https://a/wf", body, now, "jwt_1"))
	require.NoError(t, err)
	v := wire.Verifier{CurrentKey: "sig_current", NextKey: "sig_next"}
	_, err = v.VerifyClaims(tok, body, "", now)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = v.VerifyClaims(tok, body, "", now)
	})
	require.LessOrEqual(t, allocs, 6.0) // was 36 before the claims were decoded by hand
}
