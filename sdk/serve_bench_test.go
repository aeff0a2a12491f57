package sdk

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

// A workflow endpoint's work per delivery, without the network: a signed delivery of
// `bench workflow`'s 3-step noop route at its last step (the payload and two steps in
// its history, an inline offer), served by Serve with verification on.

const benchStepKey = "sig_bench_current_key_0123456789abcdef"

// benchRoute is `bench workflow`'s route: three Run steps that return their index.
func benchRoute(c *Context) (any, error) {
	for i := range 3 {
		if _, err := Run(c, "s"+strconv.Itoa(i), func() (int, error) { return i, nil }); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// stepServing holds one delivery and serves it again and again.
type stepServing struct {
	h    http.Handler
	r    *http.Request
	body []byte
	rd   bytes.Reader
	w    *discardWriter
}

func newStepServing(tb testing.TB) *stepServing {
	body := []byte{'['}
	steps := []string{`{}`, `{"concurrent":1,"out":"0","stepId":1,"stepName":"s0","stepType":"Run"}`, `{"concurrent":1,"out":"1","stepId":2,"stepName":"s1","stepType":"Run"}`}
	for i, s := range steps {
		if i > 0 {
			body = append(body, ',')
		}
		body = wire.AppendHistoryEntry(body, []byte("msg_"+strconv.Itoa(i)), []byte(s), []byte(wire.CallTypeStep))
	}
	body = append(body, ']')
	url := "http://127.0.0.1:9/wf"
	sig, err := wire.Sign(benchStepKey, wire.NewClaims(url, body, time.Now(), "jwt_bench"))
	require.NoError(tb, err)
	r := httptest.NewRequest(http.MethodPost, url, nil)
	for k, v := range map[string]string{
		wire.HeaderSignature: sig, wire.HeaderWorkflowSdkVersion: wire.SdkVersion,
		wire.HeaderWorkflowRunID: "wfr_bench_1", wire.HeaderWorkflowURL: url,
		wire.HeaderMessageID: "msg_2", wire.HeaderRetried: "0", wire.HeaderInline: "16777216",
		wire.HeaderContentType: "application/json", "Upstash-Workflow-Createdat": "1796128473557",
	} {
		r.Header.Set(k, v)
	}
	env := map[string]string{"QSTASH_URL": "http://127.0.0.1:1", "QSTASH_TOKEN": "t", "QSTASH_CURRENT_SIGNING_KEY": benchStepKey, "QSTASH_NEXT_SIGNING_KEY": benchStepKey + "n"}
	h := Serve(benchRoute, WithServeEnv(func(k string) string { return env[k] }))
	return &stepServing{h: h, r: r, body: body, w: &discardWriter{h: http.Header{}}}
}

// serve serves the delivery once and returns the answer's status.
func (s *stepServing) serve() int {
	s.rd.Reset(s.body)
	s.r.Body = io.NopCloser(&s.rd)
	clear(s.w.h)
	s.w.status, s.w.n = 0, 0
	s.h.ServeHTTP(s.w, s.r)
	return s.w.status
}

// discardWriter is an http.ResponseWriter that keeps the status and the length only.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) WriteHeader(s int) {
	if d.status == 0 {
		d.status = s
	}
}
func (d *discardWriter) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	d.n += len(p)
	return len(p), nil
}

// BenchmarkServeInlineStep is the endpoint's own work per step of `bench workflow`.
func BenchmarkServeInlineStep(b *testing.B) {
	s := newStepServing(b)
	b.ReportAllocs()
	for b.Loop() {
		if st := s.serve(); st != http.StatusOK {
			b.Fatalf("status %d", st)
		}
	}
}

// TestServeInlineStepAllocationBudget: the answer is the run's end with the last step
// inline, and serving it stays within its allocations.
func TestServeInlineStepAllocationBudget(t *testing.T) {
	s := newStepServing(t)
	require.Equal(t, http.StatusOK, s.serve())
	require.Equal(t, wire.InlineEnd, s.w.h.Get(wire.HeaderInline))
	require.NotEmpty(t, s.w.h.Get(wire.HeaderInlineSteps))
	allocs := testing.AllocsPerRun(100, func() { s.serve() })
	t.Logf("%.0f allocations per delivery", allocs)
	require.LessOrEqual(t, allocs, 85.0) // 67 when written
}
