package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A batch entry's body may be a JSON string or any other JSON value, whose text it then is
// (@upstash/workflow's context.call puts an object body there as it is).
func TestBatchEntryBodyOfAnyJSON(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`[{"destination":"d","body":"text \"q\""}]`, `text "q"`},
		{`[{"destination":"d","body":{"a":1,"b":["x"]}}]`, `{"a":1,"b":["x"]}`},
		{`[{"destination":"d","body":[1,2]}]`, `[1,2]`},
		{`[{"destination":"d","body":42}]`, `42`},
		{`[{"destination":"d","body":null}]`, ``},
		{`[{"destination":"d","headers":{"a":"b"}}]`, ``},
	} {
		entries, err := DecodeBatch([]byte(tt.raw))
		require.NoError(t, err, tt.raw)
		require.Len(t, entries, 1)
		require.Equal(t, tt.want, entries[0].Body, tt.raw)
		require.Equal(t, "d", entries[0].Destination)
	}
	_, err := DecodeBatch([]byte(`[{"destination":"d","body":{"a":}}]`))
	require.Error(t, err)
}
