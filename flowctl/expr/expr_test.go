package expr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func event(t *testing.T, data string) map[string]any {
	t.Helper()
	ev, err := Event("evt_1", "order.paid", json.RawMessage(data), 1700000000000)
	require.NoError(t, err)
	return map[string]any{"event": ev}
}

func TestTextRendersJSONWithStringsUnquoted(t *testing.T) {
	vars := event(t, `{"orderId":"o1","n":42,"f":1.5,"whole":2.0,"ok":true,"obj":{"b":1,"a":[1,"x"]},"nil":null}`)
	for src, want := range map[string]string{
		`event.data.orderId`:                        "o1",
		`event.data.n`:                              "42",
		`event.data.f`:                              "1.5",
		`event.data.whole`:                          "2",
		`event.data.ok`:                             "true",
		`event.data.obj`:                            `{"a":[1,"x"],"b":1}`,
		`event.data.orderId + "/" + event.name`:     "o1/order.paid",
		`event.ts`:                                  "1700000000000",
		`[event.data.orderId, event.data.n]`:        `["o1",42]`,
		`string(event.data.n) + event.data.orderId`: "42o1",
	} {
		p, err := Compile(src, "event")
		require.NoError(t, err, src)
		got, err := p.Text(vars)
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
	p, err := Compile(`event.data.nil`, "event")
	require.NoError(t, err)
	_, err = p.Text(vars)
	require.ErrorIs(t, err, ErrNoValue)
	p, err = Compile(`event.data.missing`, "event")
	require.NoError(t, err)
	_, err = p.Text(vars)
	require.ErrorContains(t, err, "no such key: missing")
}

func TestRenderQuoted(t *testing.T) {
	p, err := Compile(`event.data.orderId`, "event")
	require.NoError(t, err)
	v, err := p.Eval(event(t, `{"orderId":"o1"}`))
	require.NoError(t, err)
	s, err := Render(v, true)
	require.NoError(t, err)
	require.Equal(t, `"o1"`, s)
}

func TestCompileErrorsNameTheProblem(t *testing.T) {
	for src, want := range map[string]string{
		`event.data.`:             "Syntax error",
		`order.data.id`:           "undeclared reference to 'order'",
		`1 + "a"`:                 "found no matching overload for '_+_'",
		``:                        "the expression is empty",
		strings.Repeat("a", 2000): "the limit is 1024",
	} {
		_, err := Compile(src, "event")
		var e *Error
		require.ErrorAs(t, err, &e, src)
		require.Contains(t, e.Msg, want, src)
		require.NotContains(t, e.Msg, "\n", src)
	}
}

func TestConditionsWithNumbers(t *testing.T) {
	ev, err := Event("evt_1", "order.placed", json.RawMessage(`{"orderId":"o1","amount":150}`), 1)
	require.NoError(t, err)
	for src, want := range map[string]bool{
		`async.data.amount > 100`:    true,
		`async.data.amount > 100.5`:  true,
		`async.data.amount >= 200`:   false,
		`async.data.amount == 120.0`: true,
		`async.data.orderId == event.data.orderId && async.data.amount > 100`: true,
		`async.data.orderId == event.data.orderId && async.data.amount > 150`: false,
	} {
		p, err := Compile(src, "event", "async")
		require.NoError(t, err, src)
		require.NoError(t, p.CheckBool(), src)
		async, err := Event("evt_2", "order.paid", json.RawMessage(`{"orderId":"o1","amount":120}`), 2)
		require.NoError(t, err)
		got, err := p.Bool(map[string]any{"event": ev, "async": async})
		require.NoError(t, err, src)
		require.Equal(t, want, got, src)
	}
	p, err := Compile(`event.data.orderId`, "event", "async")
	require.NoError(t, err)
	require.NoError(t, p.CheckBool(), "dyn may be a bool at run time")
	p, err = Compile(`"a" + "b"`, "event", "async")
	require.NoError(t, err)
	require.ErrorContains(t, p.CheckBool(), "must be a bool")
}

func TestInt(t *testing.T) {
	vars := event(t, `{"p":12,"f":3.0,"h":2.5,"s":"x"}`)
	for src, want := range map[string]int64{`event.data.p * 10`: 120, `event.data.f`: 3, `-7`: -7} {
		p, err := Compile(src, "event")
		require.NoError(t, err)
		n, err := p.Int(vars)
		require.NoError(t, err, src)
		require.Equal(t, want, n, src)
	}
	for _, src := range []string{`event.data.h`, `event.data.s`} {
		p, err := Compile(src, "event")
		require.NoError(t, err)
		_, err = p.Int(vars)
		require.Error(t, err, src)
	}
}

func TestCostLimitStopsAnEvaluation(t *testing.T) {
	p, err := Compile(`event.data.xs.map(x, event.data.xs.map(y, x * y)).size() > 0`, "event")
	require.NoError(t, err)
	xs := make([]string, 500)
	for i := range xs {
		xs[i] = "1"
	}
	_, err = p.Bool(event(t, `{"xs":[`+strings.Join(xs, ",")+`]}`))
	require.ErrorContains(t, err, "cost limit")
}

func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(2)
	a, err := c.Compile(`event.data.a`, "event")
	require.NoError(t, err)
	b, err := c.Compile(`event.data.a`, "event")
	require.NoError(t, err)
	require.Same(t, a, b)
	_, err = c.Compile(`event.data.`, "event")
	var e *Error
	require.True(t, errors.As(err, &e))
	// Full: emptied, still correct.
	d, err := c.Compile(`event.data.b`, "event")
	require.NoError(t, err)
	require.Equal(t, `event.data.b`, d.Source())
	a2, err := c.Compile(`event.data.a`, "event")
	require.NoError(t, err)
	require.Equal(t, a.Source(), a2.Source())
}

func TestEqualityConjunct(t *testing.T) {
	for src, want := range map[string]string{
		`async.data.orderId == event.data.orderId`:                                   "data.orderId",
		`event.data.id == async.data.id && async.data.n > 1`:                         "data.id",
		`async.data.n > 1 && (async.data.a.b == event.data.a.b)`:                     "data.a.b",
		`(async.data.id == event.data.id) && (async.data.n > 1 && async.name != "")`: "data.id",
		`async.data.id == event.data.id || async.data.n > 1`:                         "",
		`async.data.id == event.data.other`:                                          "",
		`async.data.id == async.data.id`:                                             "",
		`!(async.data.id == event.data.id)`:                                          "",
		`async.data.n > 1 ? async.data.id == event.data.id : true`:                   "",
	} {
		p, err := Compile(src, "event", "async")
		require.NoError(t, err, src)
		got, ok := p.EqualityConjunct("async", "event")
		require.Equal(t, want, got, src)
		require.Equal(t, want != "", ok, src)
	}
}
