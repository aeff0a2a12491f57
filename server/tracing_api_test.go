package server

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/tracing"
)

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback that keeps what it gets.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) (*otlpReceiver, string) {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || req.URL.Path != "/v1/traces" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		var msg collectorpb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL + "/v1/traces"
}

func (r *otlpReceiver) byName() map[string][]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]*tracepb.Span{}
	for _, s := range r.spans {
		out[s.Name] = append(out[s.Name], s)
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// With an OTLP endpoint, a 3-step run arrives at a collector on loopback as one trace
// (its id derived from the run id): the run's root span, a span per step and per
// attempt, with the run id, workflow and outcome; each delivery carried a traceparent
// naming its attempt's span in that trace.
func TestRunExportedAsOneTrace(t *testing.T) {
	t.Parallel()
	recv, endpoint := newOTLPReceiver(t)
	exp, err := tracing.New(context.Background(), tracing.Config{Endpoint: endpoint})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exp.Close(context.Background()) })
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Tracer, c.Runs = exp, exp }})
	exp.ReadRuns(env.native)

	var mu sync.Mutex
	var parents []string
	app := newSDKApp(t, env)
	route := sdk.Serve(func(c *sdk.Context) (any, error) {
		for _, name := range []string{"one", "two", "three"} {
			if _, err := sdk.Run(c, name, func() (string, error) { return name, nil }); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}, sdk.WithServeEnv(app.env))
	app.mux.Handle("/three", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("Traceparent"))
		mu.Unlock()
		route.ServeHTTP(w, r)
	}))
	url := app.srv.URL + "/three"
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "three", "url": %q, "triggers": [{"event": "go"}]}]}`, url))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "succeeded")

	tid := delivery.TraceID(runID)
	var spans map[string][]*tracepb.Span
	eventually(t, "the run's spans at the collector", func() bool {
		require.NoError(t, exp.Flush(context.Background()))
		spans = recv.byName()
		return len(spans["run three"]) == 1 && len(spans["step three"]) == 1
	})
	root := spans["run three"][0]
	require.Equal(t, tid[:], root.TraceId)
	require.Empty(t, root.ParentSpanId)
	require.Equal(t, runID, attr(root, "duraton.run_id"))
	require.Equal(t, "three", attr(root, "duraton.workflow"))
	require.Equal(t, "succeeded", attr(root, "duraton.outcome"))
	for _, name := range []string{"step one", "step two", "step three"} {
		require.Len(t, spans[name], 1, name)
		s := spans[name][0]
		require.Equal(t, tid[:], s.TraceId, "%s is in the run's trace", name)
		require.Equal(t, root.SpanId, s.ParentSpanId)
		require.Equal(t, "succeeded", attr(s, "duraton.outcome"))
	}
	require.NotEmpty(t, spans["attempt"])
	ids := map[string]bool{}
	for _, a := range spans["attempt"] {
		require.Equal(t, tid[:], a.TraceId)
		require.Equal(t, root.SpanId, a.ParentSpanId)
		require.Equal(t, runID, attr(a, "duraton.run_id"))
		ids[hex.EncodeToString(a.SpanId)] = true
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, parents)
	for _, p := range parents {
		require.Regexp(t, "^00-"+hex.EncodeToString(tid[:])+"-[0-9a-f]{16}-01$", p)
		require.True(t, ids[p[36:52]], "traceparent %s names an exported attempt span", p)
	}
}
