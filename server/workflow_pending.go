package server

import (
	"encoding/json"
	"net/http"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// withPending adds to a run's step groups the deliveries whose steps are not recorded
// (delivery.PendingStep), as QStash's logs show them: a branch of a parallel group (a
// plan step) joins that group, with its state; any other delivery is the run's "next"
// step, in a group of type "next" at the end.
func withPending(groups []wire.StepGroup, pending []delivery.PendingStep) []wire.StepGroup {
	var next []wire.StepLog
	for i := range pending {
		p := &pending[i]
		plan, ok := planStep(p.Body)
		if !ok {
			next = append(next, nextStepLog(p))
			continue
		}
		step := wire.StepLog{
			"stepId": rawJSON(plan.TargetStep), "stepName": rawJSON(plan.StepName), "stepType": rawJSON(plan.StepType),
			"concurrent": rawJSON(plan.Concurrent), "messageId": rawJSON(p.MessageID), "callType": rawJSON(delivery.CallStep),
			"state": rawJSON(p.State), "retries": rawJSON(p.Retries), "createdAt": rawJSON(p.CreatedAt),
		}
		if p.Failure != nil {
			step["errors"] = rawJSON([]stepError{stepErrorOf(p)})
		}
		groups = joinParallel(groups, step, plan.Concurrent)
	}
	if len(next) > 0 {
		groups = append(groups, wire.StepGroup{Type: "next", Steps: next})
	}
	return groups
}

// planStepBody is what a plan step (a parallel branch to run) says of its branch.
type planStepBody struct {
	StepID     *int   `json:"stepId"`
	TargetStep int    `json:"targetStep"`
	StepName   string `json:"stepName"`
	StepType   string `json:"stepType"`
	Concurrent int    `json:"concurrent"`
}

func planStep(body []byte) (planStepBody, bool) {
	var p planStepBody
	if json.Unmarshal(body, &p) != nil || p.StepID == nil || *p.StepID != 0 || p.TargetStep <= 0 || p.Concurrent <= 1 {
		return p, false
	}
	return p, true
}

// joinParallel adds a branch to the last parallel group of its size that has room, or
// starts one.
func joinParallel(groups []wire.StepGroup, step wire.StepLog, concurrent int) []wire.StepGroup {
	if n := len(groups); n > 0 {
		g := &groups[n-1]
		if g.Type == "parallel" && len(g.Steps) < concurrent && concurrentOf(g.Steps[0]) == concurrent {
			g.Steps = append(g.Steps, step)
			return groups
		}
	}
	return append(groups, wire.StepGroup{Type: "parallel", Steps: []wire.StepLog{step}})
}

func concurrentOf(s wire.StepLog) int {
	var n int
	_ = json.Unmarshal(s["concurrent"], &n) // absent: 0, which matches no branch
	return n
}

// nextStepLog is the entry of a "next" group: the delivery, its state and retries, and for
// a failed one the step's name (from the SDK's Upstash-Error-Step-Name) and its error.
func nextStepLog(p *delivery.PendingStep) wire.StepLog {
	step := wire.StepLog{"messageId": rawJSON(p.MessageID), "state": rawJSON(p.State), "retries": rawJSON(p.Retries)}
	if p.RetryDelay != "" {
		step["retryDelay"] = rawJSON(p.RetryDelay)
	}
	if p.Failure != nil {
		if name := http.Header(p.Failure.Header).Get(wire.HeaderErrorStepName); name != "" {
			step["stepName"] = rawJSON(name)
		}
		step["errors"] = rawJSON([]stepError{stepErrorOf(p)})
	}
	return step
}

// stepError is one failed attempt of a step (the SDK's StepError). Duraton lists the
// attempt that failed the run; earlier attempts are in the message logs.
type stepError struct {
	Error   string              `json:"error"`
	Body    string              `json:"body"`
	Headers map[string][]string `json:"headers"`
	Status  int                 `json:"status"`
	Time    int64               `json:"time"`
}

func stepErrorOf(p *delivery.PendingStep) stepError {
	r := p.Failure
	msg := r.Error
	if msg == "" {
		msg = http.StatusText(r.Status)
	}
	h := r.Header
	if h == nil {
		h = map[string][]string{}
	}
	return stepError{Error: msg, Body: string(r.Body), Headers: h, Status: r.Status, Time: p.FailedAt}
}
