package sdk

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

// The inline answer (wire.HeaderInline) seen from the endpoint: deliveries are built by
// hand (history body and headers as Duraton sends them) and served by Serve, whose API
// calls go to an apiFake. Verification is off: it is not what these tests are about.

const (
	inlineRunID = "wfr_inline"
	inlineURL   = "http://app.example/wf"
)

// inlineRoute runs a step "a" (result 1), then sleeps "nap" for 2s, and returns {"a":1}.
func inlineRoute(c *Context) (any, error) {
	a, err := Run(c, "a", func() (int, error) { return 1, nil })
	if err != nil {
		return nil, err
	}
	if err := c.Sleep("nap", 2*time.Second); err != nil {
		return nil, err
	}
	return map[string]int{"a": a}, nil
}

// Step objects as the history of inlineRoute's run records them.
const (
	stepA   = `{"concurrent":1,"out":"1","stepId":1,"stepName":"a","stepType":"Run"}`
	stepNap = `{"concurrent":1,"sleepFor":2,"stepId":2,"stepName":"nap","stepType":"SleepFor"}`
)

// inlineDelivery builds a workflow delivery of inlineRunID whose history is the payload
// then steps; offer > 0 sets the inline offer to that many bytes.
func inlineDelivery(offer int64, steps ...string) *http.Request {
	body := []byte{'['}
	for i, s := range append([]string{`{"order":7}`}, steps...) {
		if i > 0 {
			body = append(body, ',')
		}
		body = wire.AppendHistoryEntry(body, []byte("msg_"+strconv.Itoa(i)), []byte(s), []byte(wire.CallTypeStep))
	}
	body = append(body, ']')
	r := httptest.NewRequest(http.MethodPost, inlineURL, strings.NewReader(string(body)))
	r.Header.Set(wire.HeaderWorkflowSdkVersion, wire.SdkVersion)
	r.Header.Set(wire.HeaderWorkflowRunID, inlineRunID)
	r.Header.Set(wire.HeaderWorkflowURL, inlineURL)
	r.Header.Set("X-Tenant", "t1")
	if offer > 0 {
		r.Header.Set(wire.HeaderInline, strconv.FormatInt(offer, 10))
	}
	return r
}

// serveInline serves r with route (opts added) against a fake API and returns the
// answer and the fake.
func serveInline(t *testing.T, route RouteFunc, r *http.Request, opts ...ServeOption) (*httptest.ResponseRecorder, *apiFake) {
	t.Helper()
	fake := &apiFake{status: http.StatusOK, body: `[{"messageId":"msg_next"}]`}
	api := httptest.NewServer(fake)
	t.Cleanup(api.Close)
	h := Serve(route, append([]ServeOption{WithServeEnv(func(string) string { return "" }),
		WithServeCredentials(api.URL, "tok"), WithoutVerification()}, opts...)...)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec, fake
}

func (f *apiFake) requests() []recordedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedRequest(nil), f.reqs...)
}

// requireInline checks an inline answer of kind and returns its body.
func requireInline(t *testing.T, rec *httptest.ResponseRecorder, fake *apiFake, kind string) []byte {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, kind, rec.Header().Get(wire.HeaderInline))
	require.Equal(t, "application/json", rec.Header().Get(wire.HeaderContentType))
	require.Empty(t, fake.requests(), "an inline answer makes no API call")
	return rec.Body.Bytes()
}

// requireStepEntry checks that batch is one step message of the run with body step.
func requireStepEntry(t *testing.T, batch []byte, step string) wire.BatchEntry {
	t.Helper()
	entries, err := wire.DecodeBatch(batch)
	require.NoError(t, err, "%s", batch)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, inlineURL, e.Destination)
	require.Equal(t, inlineRunID, e.Headers["upstash-workflow-runid"])
	require.Equal(t, "false", e.Headers["upstash-workflow-init"], "a step never starts a run")
	require.Empty(t, e.Queue)
	require.JSONEq(t, step, e.Body)
	return e
}

// requireFinishAnswer checks the QStash way's answer: no inline header, the finish JSON.
func requireFinishAnswer(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Empty(t, rec.Header().Values(wire.HeaderInline))
	require.JSONEq(t, `{"workflowRunId":"`+inlineRunID+`","finishCondition":"success"}`, rec.Body.String())
}

func TestInlineAnswerSteps(t *testing.T) {
	t.Parallel()

	t.Run("RunResult", func(t *testing.T) {
		t.Parallel()
		// a's result is kept while the route goes on; the sleep needs it recorded first.
		rec, fake := serveInline(t, inlineRoute, inlineDelivery(1<<20))
		body := requireInline(t, rec, fake, wire.InlineSteps)
		require.Empty(t, rec.Header().Values(wire.HeaderInlineSteps))
		requireStepEntry(t, body, stepA)
	})

	t.Run("Sleep", func(t *testing.T) {
		t.Parallel()
		rec, fake := serveInline(t, inlineRoute, inlineDelivery(1<<20, stepA))
		e := requireStepEntry(t, requireInline(t, rec, fake, wire.InlineSteps), stepNap)
		require.Equal(t, "2s", e.Headers["upstash-delay"])
	})

	t.Run("CallCallback", func(t *testing.T) {
		t.Parallel()
		cb, err := json.Marshal(wire.CallbackPayload{Status: 201, Body: base64.StdEncoding.EncodeToString([]byte("paid"))})
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodPost, inlineURL, strings.NewReader(string(cb)))
		for k, v := range map[string]string{wire.HeaderWorkflowCallback: "true", wire.HeaderWorkflowRunID: inlineRunID,
			wire.HeaderWorkflowURL: inlineURL, wire.HeaderWorkflowStepID: "2", wire.HeaderWorkflowStepName: "pay",
			wire.HeaderWorkflowConcurrent: "1", wire.HeaderInline: "4096"} {
			r.Header.Set(k, v)
		}
		rec, fake := serveInline(t, inlineRoute, r)
		out, err := json.Marshal(CallResponse{Status: 201, Body: []byte("paid")})
		require.NoError(t, err)
		step, err := json.Marshal(stepObject(2, "pay", "Call", string(out), 1))
		require.NoError(t, err)
		requireStepEntry(t, requireInline(t, rec, fake, wire.InlineSteps), string(step))
	})

	t.Run("RouteFailsAfterRun", func(t *testing.T) {
		t.Parallel()
		// The result the route went on with is answered; the next delivery meets the
		// error again.
		route := func(c *Context) (any, error) {
			if _, err := Run(c, "a", func() (int, error) { return 1, nil }); err != nil {
				return nil, err
			}
			return nil, errors.New("boom")
		}
		rec, fake := serveInline(t, route, inlineDelivery(1<<20))
		requireStepEntry(t, requireInline(t, rec, fake, wire.InlineSteps), stepA)
	})
}

func TestInlineAnswerEnd(t *testing.T) {
	t.Parallel()

	t.Run("Result", func(t *testing.T) {
		t.Parallel()
		rec, fake := serveInline(t, inlineRoute, inlineDelivery(1<<20, stepA, stepNap))
		require.Equal(t, `{"a":1}`, string(requireInline(t, rec, fake, wire.InlineEnd)))
		require.Empty(t, rec.Header().Values(wire.HeaderInlineSteps))
	})

	t.Run("NilResult", func(t *testing.T) {
		t.Parallel()
		route := func(c *Context) (any, error) { return nil, nil }
		rec, fake := serveInline(t, route, inlineDelivery(1<<20))
		require.Empty(t, requireInline(t, rec, fake, wire.InlineEnd), "no result: an empty body")
	})

	t.Run("WithLastStep", func(t *testing.T) {
		t.Parallel()
		// The run's last step and its end in one answer: the body starts with the step
		// messages (Duraton-Inline-Steps bytes), the result follows.
		route := func(c *Context) (any, error) {
			return Run(c, "a", func() (int, error) { return 1, nil })
		}
		rec, fake := serveInline(t, route, inlineDelivery(1<<20))
		body := requireInline(t, rec, fake, wire.InlineEnd)
		n, err := strconv.Atoi(rec.Header().Get(wire.HeaderInlineSteps))
		require.NoError(t, err)
		require.Less(t, n, len(body))
		requireStepEntry(t, body[:n], stepA)
		require.Equal(t, "1", string(body[n:]))
	})

	t.Run("LastStepAloneWhenBothDoNotFit", func(t *testing.T) {
		t.Parallel()
		// The step fits the offer, the step and the result together do not: the step is
		// answered alone and the next delivery ends the run.
		big := strings.Repeat("x", 4000)
		route := func(c *Context) (any, error) {
			if _, err := Run(c, "a", func() (int, error) { return 1, nil }); err != nil {
				return nil, err
			}
			return big, nil
		}
		rec, fake := serveInline(t, route, inlineDelivery(2048))
		requireStepEntry(t, requireInline(t, rec, fake, wire.InlineSteps), stepA)
	})
}

func TestInlineAnswerFallsBackToAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		offer int64
		opts  []ServeOption
	}{
		{"NoOffer", 0, nil},
		{"OfferTooSmall", 5, nil}, // the batch and the result `{"a":1}` are bigger
		{"WithoutInlineAnswers", 1 << 20, []ServeOption{WithoutInlineAnswers()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A new step: published with POST /v2/batch, then the usual answer.
			rec, fake := serveInline(t, inlineRoute, inlineDelivery(tt.offer), tt.opts...)
			requireFinishAnswer(t, rec)
			reqs := fake.requests()
			require.Len(t, reqs, 1)
			require.Equal(t, http.MethodPost, reqs[0].Method)
			require.Equal(t, "/v2/batch", reqs[0].RequestURI)
			require.Equal(t, "Bearer tok", reqs[0].Header.Get("Authorization"))
			requireStepEntry(t, reqs[0].Body, stepA)

			// The end: DELETE of the run with the result.
			rec, fake = serveInline(t, inlineRoute, inlineDelivery(tt.offer, stepA, stepNap), tt.opts...)
			requireFinishAnswer(t, rec)
			reqs = fake.requests()
			require.Len(t, reqs, 1)
			require.Equal(t, http.MethodDelete, reqs[0].Method)
			require.Equal(t, "/v2/workflows/runs/"+inlineRunID+"?cancel=false", reqs[0].RequestURI)
			require.Equal(t, `{"a":1}`, string(reqs[0].Body))
		})
	}
}

// TestInlineOfferNotARouteHeader: the offer is the protocol's business, not the route's:
// ctx.Headers keeps the delivery's other headers but not Duraton-Inline.
func TestInlineOfferNotARouteHeader(t *testing.T) {
	t.Parallel()
	var seen http.Header
	route := func(c *Context) (any, error) {
		seen = c.Headers.Clone()
		return inlineRoute(c)
	}
	rec, _ := serveInline(t, route, inlineDelivery(1<<20))
	require.Equal(t, wire.InlineSteps, rec.Header().Get(wire.HeaderInline), "the offer was read")
	require.Equal(t, "t1", seen.Get("X-Tenant"))
	require.Empty(t, seen.Values(wire.HeaderInline))
}
