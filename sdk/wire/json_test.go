package wire

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompactJSON(t *testing.T) {
	t.Parallel()
	got, err := CompactJSON(map[string]any{"html": "<b>&</b>", "n": 1})
	require.NoError(t, err)
	require.Equal(t, `{"html":"<b>&</b>","n":1}`, string(got), "compact, no HTML escaping, no newline")

	_, err = CompactJSON(func() {})
	require.Error(t, err)
	require.Panics(t, func() { MustCompactJSON(make(chan int)) })
}

func TestBodyFields(t *testing.T) {
	t.Parallel()
	for _, body := range [][]byte{nil, []byte("text é"), {0xff, 0x00, 0x80}} {
		text, b64 := BodyFields(body)
		require.False(t, text != "" && b64 != "", "one of the two")
		back, err := BodyBytes(text, b64)
		require.NoError(t, err)
		require.Equal(t, string(body), string(back))
	}
	text, b64 := BodyFields([]byte{0xff})
	require.Equal(t, "", text)
	require.Equal(t, "/w==", b64)
}

// TestStepLogAccessors reads a step the way the run log carries it.
func TestStepLogAccessors(t *testing.T) {
	t.Parallel()
	var s StepLog
	require.NoError(t, json.Unmarshal([]byte(`{"stepId":3,"stepName":"charge","stepType":"Run","out":"\"ok\"","messageId":"msg_1","callType":"step","createdAt":1700000000000,"concurrent":"bad"}`), &s))
	require.Equal(t, 3, s.StepID())
	require.Equal(t, "charge", s.StepName())
	require.Equal(t, "Run", s.StepType())
	require.Equal(t, "msg_1", s.MessageID())
	require.Equal(t, "step", s.CallType())
	require.Equal(t, int64(1700000000000), s.CreatedAt())
	require.JSONEq(t, `"\"ok\""`, string(s.Out()))
	require.Zero(t, StepLog{"stepId": json.RawMessage(`"x"`)}.StepID(), "a field of another type reads as zero")
}

// TestDeps keeps wire importable by any client: only the standard library and golang-jwt
// (docs/architecture.md, "Import rules and why").
func TestDeps(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not available:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/duraton/duraton/sdk/wire").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/duraton/duraton/sdk/wire" && !strings.HasPrefix(dep, "github.com/golang-jwt/jwt/") {
			t.Errorf("sdk/wire depends on %s: only the standard library and golang-jwt are allowed", dep)
		}
	}
}
