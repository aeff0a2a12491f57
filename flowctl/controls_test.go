package flowctl

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func parseFields(t *testing.T, s string) (Controls, error) {
	t.Helper()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(s), &fields))
	return ParseControls(fields)
}

func TestParseControlsAccepts(t *testing.T) {
	t.Parallel()
	c, err := parseFields(t, `{
		"concurrency": {"limit": 5, "key": "accountId"},
		"throttle": {"limit": 10, "perMs": 60000, "key": "user.id"},
		"rateLimit": {"limit": 3, "perMs": 1000},
		"debounce": {"periodMs": 5000, "timeoutMs": 60000, "key": "doc"},
		"priority": {"shiftMs": -43200000},
		"singleton": {"key": "accountId"},
		"idempotency": {"key": "orderId"},
		"cap": {"maxCost": 0.5},
		"tokenThrottle": {"tokens": 100000, "perMs": 3600000}
	}`)
	require.NoError(t, err)
	require.Equal(t, []Concurrency{{Limit: 5, Key: "accountId"}}, c.Concurrency)
	require.Equal(t, &GCRALimit{Limit: 10, PerMs: 60000, Key: "user.id"}, c.Throttle)
	require.Equal(t, SingletonCancel, c.Singleton.Mode, "singleton mode defaults to cancel")
	require.Equal(t, int64(DefaultIdempotencyMs), c.Idempotency.PeriodMs, "idempotency period defaults to 24 h")
	require.InDelta(t, 0.5, *c.Cap.MaxCost, 0)
	require.Nil(t, c.Cap.MaxTokens)
	require.Equal(t, int64(100000), c.TokenThrottle.Tokens)

	c, err = parseFields(t, `{"concurrency": [{"limit": 2}, {"limit": 1, "key": "a.b"}], "batch": {"maxSize": 1000, "timeoutMs": 3600000, "key": "index"}}`)
	require.NoError(t, err)
	require.Equal(t, []Concurrency{{Limit: 2}, {Limit: 1, Key: "a.b"}}, c.Concurrency)
	require.Equal(t, &Batch{MaxSize: 1000, TimeoutMs: 3600000, Key: "index"}, c.Batch)

	c, err = parseFields(t, `{"concurrency": {"limit": 3, "key": "account", "scope": "app"}, "throttle": {"limit": 4, "perMs": 1000, "burst": 1}}`)
	require.NoError(t, err)
	require.Equal(t, []Concurrency{{Limit: 3, Key: "account", Scope: ScopeApp}}, c.Concurrency)
	require.Equal(t, &GCRALimit{Limit: 4, PerMs: 1000, Burst: 1}, c.Throttle)
	require.Equal(t, 1, c.Throttle.BurstOrLimit())

	c, err = parseFields(t, `{}`)
	require.NoError(t, err)
	require.Equal(t, Controls{}, c)
}

func TestParseControlsRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, field string
	}{
		{"UnknownControlField", `{"rateLimit": {"limit": 1, "perMs": 1000, "burst": 1}}`, "rateLimit.burst"},
		{"EstimateOverTokens", `{"tokenThrottle": {"tokens": 10, "perMs": 1000, "estimate": 11}}`, "tokenThrottle.estimate"},
		{"EstimateZero", `{"tokenThrottle": {"tokens": 10, "perMs": 1000, "estimate": 0}}`, "tokenThrottle.estimate"},
		{"BurstOverLimit", `{"throttle": {"limit": 1, "perMs": 1000, "burst": 3}}`, "throttle.burst"},
		{"BurstZero", `{"throttle": {"limit": 2, "perMs": 1000, "burst": 0}}`, "throttle.burst"},
		{"BurstNegative", `{"throttle": {"limit": 2, "perMs": 1000, "burst": -1}}`, "throttle.burst"},
		{"UnknownScope", `{"concurrency": {"limit": 2, "scope": "project"}}`, "concurrency.scope"},
		{"UnknownScopeSecond", `{"concurrency": [{"limit": 2}, {"limit": 1, "key": "a", "scope": "App"}]}`, "concurrency[1].scope"},
		{"TypoInConcurrency", `{"concurrency": {"limt": 1}}`, "concurrency.limt"},
		{"NotAnObject", `{"debounce": 5000}`, "debounce"},
		{"Null", `{"batch": null}`, "batch"},
		{"NullInside", `{"rateLimit": {"limit": null, "perMs": 1000}}`, "rateLimit.limit"},
		{"WrongType", `{"rateLimit": {"limit": "3", "perMs": 1000}}`, "rateLimit.limit"},
		{"Fraction", `{"throttle": {"limit": 1.5, "perMs": 1000}}`, "throttle.limit"},
		{"ConcurrencyZero", `{"concurrency": {"limit": 0}}`, "concurrency.limit"},
		{"ConcurrencyTooHigh", `{"concurrency": {"limit": 100001}}`, "concurrency.limit"},
		{"ConcurrencyThree", `{"concurrency": [{"limit": 1}, {"limit": 1, "key": "a"}, {"limit": 1, "key": "b"}]}`, "concurrency"},
		{"ConcurrencyEmptyArray", `{"concurrency": []}`, "concurrency"},
		{"ConcurrencySameKey", `{"concurrency": [{"limit": 1, "key": "a"}, {"limit": 2, "key": "a"}]}`, "concurrency[1].key"},
		{"ConcurrencyItemBad", `{"concurrency": [{"limit": 1}, {"limit": -1, "key": "a"}]}`, "concurrency[1].limit"},
		{"ThrottlePerMsShort", `{"throttle": {"limit": 1, "perMs": 999}}`, "throttle.perMs"},
		{"ThrottlePerMsLong", `{"throttle": {"limit": 1, "perMs": 604800001}}`, "throttle.perMs"},
		{"RateLimitPerMsLong", `{"rateLimit": {"limit": 1, "perMs": 86400001}}`, "rateLimit.perMs"},
		{"RateLimitMissingLimit", `{"rateLimit": {"perMs": 1000}}`, "rateLimit.limit"},
		{"DebounceShort", `{"debounce": {"periodMs": 500}}`, "debounce.periodMs"},
		{"DebounceTimeoutBelowPeriod", `{"debounce": {"periodMs": 5000, "timeoutMs": 4000}}`, "debounce.timeoutMs"},
		{"BatchSizeOne", `{"batch": {"maxSize": 1, "timeoutMs": 1000}}`, "batch.maxSize"},
		{"BatchSizeBig", `{"batch": {"maxSize": 1001, "timeoutMs": 1000}}`, "batch.maxSize"},
		{"BatchTimeoutLong", `{"batch": {"maxSize": 2, "timeoutMs": 3600001}}`, "batch.timeoutMs"},
		{"PriorityFar", `{"priority": {"shiftMs": 43200001}}`, "priority.shiftMs"},
		{"PriorityFarNegative", `{"priority": {"shiftMs": -43200001}}`, "priority.shiftMs"},
		{"SingletonMode", `{"singleton": {"mode": "queue"}}`, "singleton.mode"},
		{"IdempotencyLong", `{"idempotency": {"periodMs": 2592000001}}`, "idempotency.periodMs"},
		{"CapEmpty", `{"cap": {}}`, "cap"},
		{"CapNegative", `{"cap": {"maxCost": -1}}`, "cap.maxCost"},
		{"CapTokensZero", `{"cap": {"maxTokens": 0}}`, "cap.maxTokens"},
		{"TokenThrottleZero", `{"tokenThrottle": {"tokens": 0, "perMs": 1000}}`, "tokenThrottle.tokens"},
		{"TokenThrottleLong", `{"tokenThrottle": {"tokens": 1, "perMs": 86400001}}`, "tokenThrottle.perMs"},
		{"KeyLeadingDot", `{"throttle": {"limit": 1, "perMs": 1000, "key": ".user"}}`, "throttle.key"},
		{"KeyTrailingDot", `{"singleton": {"key": "user."}}`, "singleton.key"},
		{"KeyEmptySegment", `{"concurrency": {"limit": 1, "key": "user..id"}}`, "concurrency.key"},
		{"KeyEmpty", `{"idempotency": {"key": ""}}`, "idempotency.key"},
		{"BatchWithDebounce", `{"batch": {"maxSize": 2, "timeoutMs": 1000}, "debounce": {"periodMs": 1000}}`, "debounce"},
		{"BatchWithSingleton", `{"batch": {"maxSize": 2, "timeoutMs": 1000}, "singleton": {}}`, "singleton"},
		{"BatchWithPriority", `{"batch": {"maxSize": 2, "timeoutMs": 1000}, "priority": {"shiftMs": 1}}`, "priority"},
		{"BatchWithRateLimit", `{"batch": {"maxSize": 2, "timeoutMs": 1000}, "rateLimit": {"limit": 1, "perMs": 1000}}`, "rateLimit"},
		{"BatchWithIdempotency", `{"batch": {"maxSize": 2, "timeoutMs": 1000}, "idempotency": {}}`, "idempotency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseFields(t, tt.in)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a FieldError, got %v", err)
			require.Equal(t, tt.field, fe.Field, "error: %v", err)
			require.NotEmpty(t, fe.Msg)
		})
	}
}

func TestParseControlsBoundsInclusive(t *testing.T) {
	t.Parallel()
	_, err := parseFields(t, `{"throttle": {"limit": 1, "perMs": 604800000}, "rateLimit": {"limit": 1, "perMs": 86400000},
		"debounce": {"periodMs": 1000, "timeoutMs": 1000}, "priority": {"shiftMs": 43200000},
		"idempotency": {"periodMs": 2592000000}, "concurrency": {"limit": 100000}, "singleton": {"mode": "skip"}}`)
	require.NoError(t, err)
}
