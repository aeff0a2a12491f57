package sdk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDecodeStepIsUnmarshal: on step objects as the Go SDK and the TypeScript SDK write
// them, with random names and results, some of them mutated, decodeStep gives exactly
// what encoding/json gives (value or error), and the objects the SDKs write take the
// hand-written path.
func TestDecodeStepIsUnmarshal(t *testing.T) {
	t.Parallel()
	text := rapid.OneOf(rapid.StringMatching(`[ -!#-\[\]-~]{0,10}`), rapid.String())
	fast := 0
	rapid.Check(t, func(rt *rapid.T) {
		out := text.Draw(rt, "out")
		if rapid.Bool().Draw(rt, "jsonOut") {
			o, _ := json.Marshal(map[string]any{"a": text.Draw(rt, "a"), "n": rapid.Int().Draw(rt, "n")})
			out = string(o)
		}
		st := resultStep{Concurrent: rapid.IntRange(-2, 3).Draw(rt, "concurrent"), Out: out,
			StepID: rapid.IntRange(-1, 1e6).Draw(rt, "id"), StepName: text.Draw(rt, "name"), StepType: rapid.SampledFrom([]string{"Run", "SleepFor", "Call", "Wait"}).Draw(rt, "type")}
		var raw []byte
		switch rapid.IntRange(0, 2).Draw(rt, "writer") {
		case 0: // the Go SDK
			raw, _ = json.Marshal(st)
		case 1: // the TypeScript SDK's order, a plan step's targetStep
			raw, _ = json.Marshal(struct {
				StepID     int    `json:"stepId"`
				StepName   string `json:"stepName"`
				StepType   string `json:"stepType"`
				Out        string `json:"out"`
				Concurrent int    `json:"concurrent"`
				TargetStep int    `json:"targetStep"`
			}{st.StepID, st.StepName, st.StepType, st.Out, st.Concurrent, rapid.IntRange(0, 3).Draw(rt, "target")})
		default: // other keys and values
			raw, _ = json.Marshal(map[string]any{"stepId": st.StepID, "out": rapid.SampledFrom([]any{1, nil, st.Out, map[string]int{"x": 1}}).Draw(rt, "outValue"),
				rapid.SampledFrom([]string{"sleepFor", "StepName", "waitTimeout", "concurrent"}).Draw(rt, "key"): rapid.SampledFrom([]any{1, "x", true, 1.5}).Draw(rt, "value")})
		}
		mutated := rapid.IntRange(0, 3).Draw(rt, "mutate") == 0
		if mutated {
			i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
			raw[i] = rapid.SampledFrom([]byte("{}\":, -0\\u1.x\x01\t")).Draw(rt, "byte")
		}
		var want recordedStep
		wantErr := json.Unmarshal(raw, &want)
		var got recordedStep
		err := decodeStep(raw, &got)
		if wantErr != nil {
			require.EqualError(rt, err, wantErr.Error(), "%s", raw)
			return
		}
		require.NoError(rt, err, "%s", raw)
		require.Equal(rt, want, got, "%s", raw)
		var s recordedStep
		if fastStep(raw, &s) {
			fast++
		} else if !mutated && plainName(st.StepName) && !strings.Contains(string(raw), `"out":{`) && isStepWriter(raw) {
			rt.Fatalf("a step object as the SDKs write it was left to encoding/json: %s", raw)
		}
	})
	t.Logf("%d step objects decoded by hand", fast)
}

// plainName reports whether json.Marshal writes s without escapes.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || strings.IndexByte(`"\\<>&`, c) >= 0 {
			return false
		}
	}
	return true
}

// isStepWriter reports whether raw has only the keys the SDKs write.
func isStepWriter(raw []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for k, v := range m {
		switch k {
		case "stepId", "concurrent", "targetStep", "stepName", "stepType":
		case "out":
			if len(v) == 0 || v[0] != '"' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// deliveryHistory is the body of a 3-step run's last delivery, as Duraton sends it.
func deliveryHistory() []byte {
	steps := []string{`{}`}
	for i := 0; i < 3; i++ {
		raw, _ := json.Marshal(resultStep{Concurrent: 1, Out: `"` + string(rune('0'+i)) + `"`, StepID: i + 1, StepName: "s" + string(rune('0'+i)), StepType: "Run"})
		steps = append(steps, string(raw))
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range steps {
		if i > 0 {
			b.WriteByte(',')
		}
		enc, _ := json.Marshal(map[string]any{"messageId": "msg_" + string(rune('a'+i)), "body": []byte(s), "callType": "step"})
		b.Write(enc)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// BenchmarkParseHistory is a delivery's history read into the Context.
func BenchmarkParseHistory(b *testing.B) {
	body := deliveryHistory()
	b.ReportAllocs()
	for b.Loop() {
		var c Context
		if err := c.parseHistory(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseHistoryAllocationBudget: the step objects of a history are decoded without
// reflection (encoding/json took ~8 allocations per step object).
func TestParseHistoryAllocationBudget(t *testing.T) {
	body := deliveryHistory()
	var c Context
	require.NoError(t, c.parseHistory(body))
	require.Len(t, c.steps, 3)
	require.Equal(t, json.RawMessage(`"\"2\""`), c.steps[3].Out)
	allocs := testing.AllocsPerRun(50, func() {
		var c Context
		_ = c.parseHistory(body)
	})
	require.LessOrEqual(t, allocs, 26.0) // 54 with encoding/json for the step objects and copied keys
}
