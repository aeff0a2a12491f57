package server

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/sdk/wire"
)

// goStepAnswer is the inline answer of a Go SDK delivery that ran one Run step: the
// batch of that step's result, with the headers the SDK writes.
var goStepAnswer = wire.AppendBatchJSON(nil, []wire.BatchEntry{{
	Destination: "http://127.0.0.1:35801/wf",
	Headers: map[string]string{
		"upstash-workflow-init":                        "false",
		"upstash-workflow-runid":                       "wfr_bench_0",
		"upstash-workflow-url":                         "http://127.0.0.1:35801/wf",
		"upstash-workflow-sdk-version":                 "1",
		"upstash-forward-upstash-workflow-sdk-version": "1",
		"upstash-feature-set":                          wire.FeatureSet,
		"upstash-method":                               "POST",
		"content-type":                                 "application/json",
	},
	Body: `{"concurrent":1,"out":"3","stepId":2,"stepName":"step-2","stepType":"Run"}`,
}})

func inlineBenchHandlers() (*publishHandlers, *delivery.Message) {
	cfg := Config{CheckDestination: netguard.Policy{Allow: netguard.LoopbackPrefixes()}.CheckURL}.withDefaults()
	h := &publishHandlers{cfg: cfg, limits: cfg.publishLimits()}
	return h, &delivery.Message{Project: "default", RunID: "wfr_bench_0", CallerIP: "127.0.0.1"}
}

// The parse of every Go SDK step's inline answer has an allocation budget: a change
// that makes it much heavier fails here, not only in a benchmark nobody runs.
func TestInlineStepsAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	h, src := inlineBenchHandlers()
	pubs, err := h.inlineSteps(src, goStepAnswer)
	require.NoError(t, err)
	require.Len(t, pubs, 1)
	require.Equal(t, "wfr_bench_0", pubs[0].Message.RunID)
	allocs := testing.AllocsPerRun(200, func() { _, _ = h.inlineSteps(src, goStepAnswer) })
	require.LessOrEqual(t, allocs, 28.0, "inlineSteps allocations") // 20 since header names and constant values are interned
}

func BenchmarkInlineSteps(b *testing.B) {
	h, src := inlineBenchHandlers()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.inlineSteps(src, goStepAnswer); err != nil {
			b.Fatal(err)
		}
	}
}
