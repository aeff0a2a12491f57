package delivery

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// AI steps (flow-control.md "AI steps"): a workflow call Duraton executes against an
// OpenAI- or Anthropic-compatible API is metered (its usage recorded on the step and the
// run) and capped (the run's cap is checked before the call leaves).

// StatusBudgetExceeded is the status of the synthetic failure a budget-stopped AI step
// reports to the run's failure function (402 Payment Required).
const StatusBudgetExceeded = http.StatusPaymentRequired

// budgetStop marks an outcome made up by the cap check: the call never left.
type budgetStop struct {
	// failure is the run's failure callback, called as for any failed run.
	failure *storage.CallbackSpec
}

// BudgetFailureBody is the JSON body of a budget failure (status 402), as the failure
// function receives it: error names the cause (message repeats it, for the workflow
// SDK's failResponse), code is stable ("budget_exceeded" or "ai_price_unknown"),
// spent/projected/cap say why.
type BudgetFailureBody struct {
	Error     string          `json:"error"`
	Message   string          `json:"message"`
	Code      string          `json:"code"`
	Spent     flowctl.AIUsage `json:"spent"`
	Projected flowctl.AIUsage `json:"projected"`
	Cap       flowctl.Cap     `json:"cap"`
}

// AIPrices is the price table in force (nil: none).
func (e *Engine) AIPrices() *flowctl.AIPrices { return e.cfg.AIPrices }

// isAICall reports whether m is a workflow call that is an AI step: marked by the SDK
// (Duraton-Ai) or sent to a known AI route.
func isAICall(m *Message) bool {
	if m.RunID == "" || m.CallType != CallToCallback {
		return false
	}
	if m.AICall {
		return true
	}
	u, err := url.Parse(m.URL)
	return err == nil && flowctl.IsAIPath(u.Path)
}

// markAICall is applied when a call step is recorded: an AI call is flagged (metered
// and capped). Its credential headers are hidden like any call's (redact.go).
func markAICall(m *Message) {
	if isAICall(m) {
		m.AICall = true
	}
}

// capOutcome checks the run's cap before an AI call leaves. It returns the synthetic
// final outcome of a call the cap does not let start, nil when it may start.
func (e *Engine) capOutcome(m *Message) (*Outcome, error) {
	var run *Run
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		run, err = tx.Run(m.Project, m.RunID)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil // the run is gone: the attempt's record finds out
	}
	if err != nil || run.AICap == nil || !run.Live() {
		return nil, err
	}
	var spent flowctl.AIUsage
	if run.AIUsage != nil {
		spent = *run.AIUsage
	}
	berr := flowctl.CheckCap(run.AICap, spent, flowctl.ParseAIRequest(m.Body), e.cfg.AIPrices)
	if berr == nil {
		return nil, nil
	}
	e.log.Info("ai step stopped by the run's cap", "project", m.Project, "run_id", m.RunID, "message_id", m.ID, "code", berr.Code)
	body := BudgetFailureBody{Error: berr.Error(), Message: berr.Error(), Code: berr.Code, Spent: berr.Spent, Projected: berr.Projected, Cap: berr.Cap}
	return &Outcome{
		Verdict: Final, Fault: FaultBudget,
		Response: storage.Response{
			Status: StatusBudgetExceeded, Header: map[string][]string{"Content-Type": {"application/json"}},
			Body: wire.MustCompactJSON(body), Error: berr.Error(),
		},
		budget: &budgetStop{failure: run.FailureCallback},
	}, nil
}

// meterAI reads the usage of an AI call's answer and prices it: the provider's
// usage.cost wins, else the price table (by the request's model, then the answer's);
// a model without a price costs 0. An answer without usage is not metered.
func (e *Engine) meterAI(m *Message, out *Outcome) {
	if out.Verdict != Delivered {
		return
	}
	u, reported, ok := flowctl.ParseAIUsage(out.Response.Body)
	if !ok {
		return
	}
	if req := flowctl.ParseAIRequest(m.Body); req.Model != "" {
		if _, priced := e.cfg.AIPrices.Price(req.Model); priced || u.Model == "" {
			u.Model = req.Model
		}
	}
	if !reported {
		u.Cost, _ = e.cfg.AIPrices.Cost(u.Model, u.InputTokens, u.OutputTokens)
	}
	if m.Callback != nil {
		u.StepID, _ = strconv.Atoi(http.Header(m.Callback.Header).Get(wire.HeaderWorkflowStepID))
	}
	out.AI = &u
}

// addRunUsageTx adds an AI step's usage to its run's spend and debits it from the run's
// tokenThrottle bucket. It must run before anything else of the transaction rewrites the
// run (the run record carries the history cursor).
func addRunUsageTx(tx *storage.Tx, project, runID string, u flowctl.AIUsage, now time.Time) (*tokenAdj, error) {
	run, err := tx.Run(project, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil // swept meanwhile
	}
	if err != nil {
		return nil, err
	}
	adj, err := debitTokensTx(tx, project, run, u.Tokens, now) // ai_tokens.go
	if err != nil {
		return nil, err
	}
	total := flowctl.AIUsage{}
	if run.AIUsage != nil {
		total = *run.AIUsage
	}
	total.Add(u)
	run.AIUsage = &total
	return adj, tx.PutRun(project, run)
}
