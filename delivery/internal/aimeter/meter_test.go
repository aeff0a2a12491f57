package aimeter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

func aiCall(body string) *storage.Message {
	return &storage.Message{
		RunID: "wfr_1", CallType: storage.CallToCallback, URL: "https://api.example/v1/chat/completions",
		Body:     []byte(body),
		Callback: &storage.CallbackSpec{Header: map[string][]string{wire.HeaderWorkflowStepID: {"3"}}},
	}
}

func TestIsCall(t *testing.T) {
	t.Parallel()
	m := aiCall(`{}`)
	if !IsCall(m) {
		t.Error("a run's call to an AI route is not an AI call")
	}
	m.RunID = ""
	if IsCall(m) {
		t.Error("a message outside a run is an AI call")
	}
	m = aiCall(`{}`)
	m.URL = "https://example/other"
	if IsCall(m) {
		t.Error("a call to another route is an AI call")
	}
	m.AICall = true
	if !IsCall(m) {
		t.Error("a call the SDK marked is not an AI call")
	}
}

func TestMeterPricesByTheRequestModel(t *testing.T) {
	t.Parallel()
	prices := &flowctl.AIPrices{Models: map[string]flowctl.ModelPrice{"small": {Input: 1, Output: 2}}}
	answer := []byte(`{"model":"small-2024","usage":{"prompt_tokens":1000000,"completion_tokens":1000000}}`)
	u := Meter(aiCall(`{"model":"small"}`), answer, prices)
	if u == nil {
		t.Fatal("an answer with usage is not metered")
	}
	if u.Model != "small" || u.Cost != 3 || u.StepID != 3 || u.Tokens != 2000000 {
		t.Errorf("usage = %+v, want model small, cost 3, step 3, 2000000 tokens", *u)
	}
	if Meter(aiCall(`{}`), []byte(`{"id":"x"}`), prices) != nil {
		t.Error("an answer without usage is metered")
	}
}

func TestStopOnlyAStartedRunOverItsCap(t *testing.T) {
	t.Parallel()
	maxTokens := int64(10)
	run := &storage.Run{State: storage.RunStarted, AICap: &flowctl.Cap{MaxTokens: &maxTokens}, AIUsage: &flowctl.AIUsage{Tokens: 10}}
	resp, code, ok := Stop(run, aiCall(`{}`), nil)
	if !ok || code != "budget_exceeded" || resp.Status != StatusBudgetExceeded {
		t.Fatalf("Stop = %v %q %d, want a stop with budget_exceeded and 402", ok, code, resp.Status)
	}
	var body FailureBody
	if err := json.Unmarshal(resp.Body, &body); err != nil || body.Code != code || body.Spent.Tokens != 10 {
		t.Errorf("body %s (%v): want the code and the spend", resp.Body, err)
	}
	run.State = storage.RunSuccess
	if _, _, ok := Stop(run, aiCall(`{}`), nil); ok {
		t.Error("an ended run's call is stopped")
	}
	run.State, run.AICap = storage.RunStarted, nil
	if _, _, ok := Stop(run, aiCall(`{}`), nil); ok {
		t.Error("a run without a cap is stopped")
	}
}

func TestShiftBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(100, 0)
	if b := shiftBucket(storage.TokenBucket{TAT: 5}, 10, now); b.TAT != now.UnixNano()+10 {
		t.Errorf("a debit of a bucket behind now: TAT %d, want now+10", b.TAT)
	}
	if b := shiftBucket(storage.TokenBucket{TAT: 5}, -3, now); b.TAT != 2 {
		t.Errorf("a credit: TAT %d, want 2", b.TAT)
	}
}
