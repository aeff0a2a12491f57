package sdk

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBudgetErrorOf(t *testing.T) {
	t.Parallel()
	body := []byte(`{"error":"budget_exceeded: the run has spent 1200 tokens","message":"budget_exceeded: the run has spent 1200 tokens",
		"code":"budget_exceeded","spent":{"inputTokens":900,"outputTokens":300,"tokens":1200,"cost":0.5},
		"projected":{"inputTokens":0,"outputTokens":100,"tokens":100,"cost":0},"cap":{"maxTokens":1000}}`)
	err := budgetErrorOf(http.StatusPaymentRequired, body)
	require.True(t, errors.Is(err, ErrBudget))
	var be *BudgetError
	require.True(t, errors.As(err, &be))
	require.Equal(t, "budget_exceeded", be.Code)
	require.Equal(t, AIUsage{InputTokens: 900, OutputTokens: 300, Tokens: 1200, Cost: 0.5}, be.Spent)
	require.Equal(t, int64(1000), *be.MaxTokens)
	require.Nil(t, be.MaxCost)
	require.Equal(t, "sdk: budget_exceeded: the run has spent 1200 tokens", be.Error())

	require.Nil(t, budgetErrorOf(http.StatusInternalServerError, body), "only a 402 is a budget stop")
	require.Nil(t, budgetErrorOf(http.StatusPaymentRequired, []byte(`{"code":"card_declined"}`)), "another 402 is not")
	require.Nil(t, budgetErrorOf(http.StatusPaymentRequired, []byte(`not json`)))
	require.False(t, errors.Is(errors.New("x"), ErrBudget))
}
