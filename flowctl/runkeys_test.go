package flowctl

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolveKeys(t *testing.T) {
	t.Parallel()
	c := Controls{
		Concurrency: []Concurrency{{Limit: 5, Key: "account"}, {Limit: 50}},
		Throttle:    &GCRALimit{Limit: 1, PerMs: 1000, Key: "user.id"},
		RateLimit:   &GCRALimit{Limit: 1, PerMs: 1000, Key: "user"},
		Priority:    &Priority{ShiftMs: 10},
		Singleton:   &Singleton{Key: "n", Mode: SingletonSkip},
		Idempotency: &Idempotency{Key: "flag", PeriodMs: 1000},
	}
	got := c.ResolveKeys(json.RawMessage(`{"account":"a1","user":{"id":1},"n":null,"flag":true}`))
	require.Equal(t, []RunKey{
		{Control: "concurrency", Path: "account", Value: `"a1"`},
		{Control: "concurrency[1]"},
		{Control: "throttle", Path: "user.id", Value: "1"},
		{Control: "rateLimit", Path: "user"}, // an object: whole workflow
		{Control: "singleton", Path: "n"},    // null: whole workflow
		{Control: "idempotency", Path: "flag", Value: "true"},
	}, got)
	require.True(t, got[1].WholeWorkflow())
	require.False(t, got[0].WholeWorkflow())
	require.Nil(t, Controls{Priority: &Priority{ShiftMs: 1}}.ResolveKeys(json.RawMessage(`{}`)))
}
