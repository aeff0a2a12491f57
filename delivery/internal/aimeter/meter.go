package aimeter

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// StatusBudgetExceeded is the status of the synthetic failure a budget-stopped AI step
// reports to the run's failure function (402 Payment Required).
const StatusBudgetExceeded = http.StatusPaymentRequired

// FailureBody is the JSON body of a budget failure (status 402), as the failure
// function receives it: error names the cause (message repeats it, for the workflow
// SDK's failResponse), code is stable ("budget_exceeded" or "ai_price_unknown"),
// spent/projected/cap say why.
type FailureBody struct {
	Error     string          `json:"error"`
	Message   string          `json:"message"`
	Code      string          `json:"code"`
	Spent     flowctl.AIUsage `json:"spent"`
	Projected flowctl.AIUsage `json:"projected"`
	Cap       flowctl.Cap     `json:"cap"`
}

// IsCall reports whether m is a workflow call that is an AI step: marked by the SDK
// (Duraton-Ai) or sent to a known AI route.
func IsCall(m *storage.Message) bool {
	if m.RunID == "" || m.CallType != storage.CallToCallback {
		return false
	}
	if m.AICall {
		return true
	}
	u, err := url.Parse(m.URL)
	return err == nil && flowctl.IsAIPath(u.Path)
}

// Stop checks run's cap before the AI call m leaves. When the cap does not let it start,
// it returns the made-up answer the call's outcome records and the budget error's code;
// ok is false when the call may start (no cap, or the run has ended).
func Stop(run *storage.Run, m *storage.Message, prices *flowctl.AIPrices) (resp storage.Response, code string, ok bool) {
	if run.AICap == nil || !run.Live() {
		return storage.Response{}, "", false
	}
	var spent flowctl.AIUsage
	if run.AIUsage != nil {
		spent = *run.AIUsage
	}
	berr := flowctl.CheckCap(run.AICap, spent, flowctl.ParseAIRequest(m.Body), prices)
	if berr == nil {
		return storage.Response{}, "", false
	}
	body := FailureBody{Error: berr.Error(), Message: berr.Error(), Code: berr.Code, Spent: berr.Spent, Projected: berr.Projected, Cap: berr.Cap}
	return storage.Response{
		Status: StatusBudgetExceeded, Header: map[string][]string{"Content-Type": {"application/json"}},
		Body: wire.MustCompactJSON(body), Error: berr.Error(),
	}, berr.Code, true
}

// Meter reads the usage of the AI call m's delivered answer and prices it: the
// provider's usage.cost wins, else the price table (by the request's model, then the
// answer's); a model without a price costs 0. An answer without usage is not metered
// (nil).
func Meter(m *storage.Message, answer []byte, prices *flowctl.AIPrices) *flowctl.AIUsage {
	u, reported, ok := flowctl.ParseAIUsage(answer)
	if !ok {
		return nil
	}
	if req := flowctl.ParseAIRequest(m.Body); req.Model != "" {
		if _, priced := prices.Price(req.Model); priced || u.Model == "" {
			u.Model = req.Model
		}
	}
	if !reported {
		u.Cost, _ = prices.Cost(u.Model, u.InputTokens, u.OutputTokens)
	}
	if m.Callback != nil {
		u.StepID, _ = strconv.Atoi(http.Header(m.Callback.Header).Get(wire.HeaderWorkflowStepID))
	}
	return &u
}
