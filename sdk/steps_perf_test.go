package sdk

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestResultStepEncodesLikeStepObject: the struct a step result is published as encodes
// to the same bytes as the map it replaced.
func TestResultStepEncodesLikeStepObject(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		id, name, typ, out := rapid.Int().Draw(rt, "id"), rapid.String().Draw(rt, "name"), rapid.String().Draw(rt, "type"), rapid.String().Draw(rt, "out")
		want, err := json.Marshal(stepObject(id, name, typ, out, 1))
		require.NoError(rt, err)
		got, err := json.Marshal(resultStep{Concurrent: 1, Out: out, StepID: id, StepName: name, StepType: typ})
		require.NoError(rt, err)
		require.Equal(rt, string(want), string(got))
	})
}

// TestOutBytesAgreesWithJSON: the copy-free reading of a step's out gives what
// encoding/json decodes, for any string (escapes, quotes, control characters, invalid
// UTF-8) and for an out that is not a string at all.
func TestOutBytesAgreesWithJSON(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var raw []byte
		if rapid.Bool().Draw(rt, "encoded") {
			enc, err := json.Marshal(rapid.String().Draw(rt, "content"))
			require.NoError(rt, err)
			raw = enc
		} else {
			raw = []byte(`"` + string(rapid.SliceOf(rapid.Byte()).Draw(rt, "bytes")) + `"`)
		}
		s := recordedStep{Out: raw}
		var want string
		if json.Unmarshal(raw, &want) != nil {
			want = string(raw)
		}
		require.Equal(rt, want, string(s.outBytes()), "out %q", raw)
		require.Equal(rt, want, s.outString())
	})
	obj := recordedStep{Out: []byte(`{"a":1}`)}
	require.Equal(t, `{"a":1}`, obj.outString())
}
