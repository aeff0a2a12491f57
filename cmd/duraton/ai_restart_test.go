package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

type aiRunView struct {
	Status string
	Usage  *struct {
		InputTokens, OutputTokens, Tokens int64
		Cost                              float64
	}
	Cap *struct{ MaxTokens int64 }
}

// TestAISpendSurvivesRestart: a run stopped by its AI cap keeps its recorded spend
// (tokens and cost priced from --ai-prices) across a SIGKILL and restart of a real
// duraton process; replayed after the restart under a raised cap, it makes only the
// calls it had not made, and its spend goes on from the stored one.
func TestAISpendSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 300, Output: 100})
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.json")
	require.NoError(t, os.WriteFile(prices, []byte(`{"models": {"mock-1": {"input": 10, "output": 10}}}`), 0o600))
	addr := freeLoopbackAddr(t)
	dataDir := filepath.Join(dir, "data")
	p1 := startDuratonAddr(t, dataDir, addr, "--ai-prices", prices)
	client := newAPIClient(t, 10*time.Second)

	route := func(c *sdk.Context) (any, error) {
		for i := 1; i <= 5; i++ {
			if _, err := sdk.AI(c, fmt.Sprintf("ask-%d", i), sdk.AIRequest{BaseURL: llm.URL() + "/v1", APIKey: "sk-restart",
				Chat: sdk.ChatRequest{Model: "mock-1", Messages: []sdk.ChatMessage{{Role: "user", Content: fmt.Sprintf("question %d", i)}}}}); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}
	mux := http.NewServeMux()
	mux.Handle("/ai", sdk.Serve(route, sdk.WithServeCredentials(p1.URL, p1.Token),
		sdk.WithReceiver(&sdk.Receiver{CurrentSigningKey: p1.CurrentSigningKey, NextSigningKey: p1.NextSigningKey})))
	wf := httptest.NewServer(mux)
	t.Cleanup(wf.Close)

	status, raw := nativeCall(t, client, p1, http.MethodPut, "/apps/ai", fmt.Sprintf(`{"workflows": [
		{"name": "ask", "url": %q, "triggers": [{"event": "ask"}], "cap": {"maxTokens": 1000}}]}`, wf.URL+"/ai"))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	runID := sendNative(t, client, p1, `{"name": "ask", "data": {}}`)[0].Runs[0].RunID
	run := func(p *proc) aiRunView {
		status, raw := nativeCall(t, client, p, http.MethodGet, "/runs/"+runID, "")
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var v aiRunView
		require.NoError(t, json.Unmarshal(raw, &v))
		return v
	}
	eventually(t, "the run stopped by its cap", func() bool { return run(p1).Status == "failed" })
	require.Equal(t, 3, llm.Count())
	p1.Kill()

	p2 := startDuratonAddr(t, dataDir, addr, "--ai-prices", prices)
	v := run(p2)
	require.Equal(t, "failed", v.Status)
	require.Equal(t, int64(1200), v.Usage.Tokens, "the spend survived the restart")
	require.InDelta(t, 0.012, v.Usage.Cost, 1e-12)

	status, raw = nativeCall(t, client, p2, http.MethodPost, "/runs/"+runID+"/replay", `{"cap": {"maxTokens": 2000}}`)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	eventually(t, "the replayed run succeeded", func() bool { return run(p2).Status == "succeeded" })
	require.Equal(t, 5, llm.Count(), "only steps 4 and 5 called the provider")
	v = run(p2)
	require.Equal(t, int64(2000), v.Usage.Tokens)
	require.InDelta(t, 0.02, v.Usage.Cost, 1e-12)
	require.Equal(t, int64(2000), v.Cap.MaxTokens)
	p2.Stop()
}
