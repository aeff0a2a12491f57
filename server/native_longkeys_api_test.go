package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Key values resolved from event data may be as long as the event allows: a value over
// flowctl.MaxKeyValueLen is used through its hash, so a 33,000-character one (over
// bbolt's key limit; 6,000 are over PostgreSQL's index row) is served like any other
// key, per value, instead of failing the commit.
func TestNativeLongKeyValues(t *testing.T) {
	t.Parallel()
	long := func(c string) string { return `{"k": "` + strings.Repeat(c, 33_000) + `"}` }
	for _, tc := range []struct {
		control string
		first   string // the first event's outcome
		again   string // the same key's second
	}{
		{`"idempotency": {"key": "k", "periodMs": 60000}`, "run", "deduped"},
		{`"rateLimit": {"limit": 1, "perMs": 60000, "key": "k"}`, "run", "dropped"},
		{`"singleton": {"key": "k", "mode": "skip"}`, "run", "skipped"},
		{`"debounce": {"periodMs": 5000, "key": "k"}`, "debounced", "debounced"},
	} {
		t.Run(strings.SplitN(tc.control, `"`, 3)[1], func(t *testing.T) {
			t.Parallel()
			env, _, _ := holdEnv(t, tc.control)
			require.Equal(t, tc.first, env.event(t, long("a")))
			require.Equal(t, tc.again, env.event(t, long("a")))
			require.Equal(t, tc.first, env.event(t, long("b")), "another long value is another key")
		})
	}
}
