package delivery

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type nopTracer struct{}

func (nopTracer) Attempt(AttemptSpan) {}

// Without a Tracer a run's delivery carries no traceparent and its exchange allocates
// what it did before tracing existed; with one it carries the attempt's span (and the
// header costs its allocations, which is how this test knows it measures the right path).
func TestTraceparentOnlyWhenTracing(t *testing.T) {
	e, m := newSendBench(t)
	var got http.Header
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(ep.Close)
	run := *m
	run.RunID, run.URL = "wfr_trace", ep.URL

	require.Equal(t, Delivered, e.send(context.Background(), &run, run.Body, time.Now()).Verdict)
	require.Empty(t, got.Get("Traceparent"))
	off := testing.AllocsPerRun(100, func() { e.send(context.Background(), &run, run.Body, time.Now()) })

	e.cfg.Tracer = nopTracer{}
	require.Equal(t, Delivered, e.send(context.Background(), &run, run.Body, time.Now()).Verdict)
	tid, sid := TraceID(run.RunID), AttemptSpanID(run.ID, run.Retried)
	require.Equal(t, "00-"+hex.EncodeToString(tid[:])+"-"+hex.EncodeToString(sid[:])+"-01", got.Get("Traceparent"))
	on := testing.AllocsPerRun(100, func() { e.send(context.Background(), &run, run.Body, time.Now()) })
	t.Logf("allocations per exchange: %.0f without a tracer, %.0f with one", off, on)
	require.Greater(t, on, off)
}
