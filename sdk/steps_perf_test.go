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
