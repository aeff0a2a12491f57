package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape fetches /metrics (with the bearer token if not empty) and parses it with the
// Prometheus text parser.
func (e *apiEnv) scrape(t *testing.T, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req := e.request(t, http.MethodGet, "/metrics", nil)
	req.Header.Del("Authorization")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r := e.send(t, req)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain"), r.Header.Get("Content-Type"))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	require.NoError(t, err, "exposition:\n%s", r.Body)
	return families
}

// value is the value of the series of family name whose labels include want
// (name/value pairs); a histogram gives its sample count.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	f := families[name]
	require.NotNil(t, f, "no metric family %s", name)
outer:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// TestMetricsAfterKnownLoad publishes a known mix (delivered, failed without retries,
// failed after two retries, a duplicate, two deliveries on a parallelism-1 key) and
// checks every counter exactly once the engine is idle.
func TestMetricsAfterKnownLoad(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	for range 5 {
		env.publish(t, env.Endpoint.URL("/ok"), []byte("a"))
	}
	for range 3 {
		env.publish(t, env.Endpoint.URL("/fail"), []byte("b"), "Upstash-Retries", "0")
	}
	for range 2 {
		env.publish(t, env.Endpoint.URL("/fail"), []byte("c"), "Upstash-Retries", "2", "Upstash-Retry-Delay", "10")
	}
	env.publish(t, env.Endpoint.URL("/ok"), []byte("d"), "Upstash-Deduplication-Id", "once")
	r := env.call(t, http.MethodPost, "/v2/publish/"+env.Endpoint.URL("/ok"), []byte("d"), "Upstash-Deduplication-Id", "once")
	require.Equal(t, http.StatusCreated, r.Status)
	require.True(t, decodeJSON[wire.PublishResult](t, r).Deduplicated)
	flow := map[string]string{"upstash-flow-control-key": "k", "upstash-flow-control-value": "parallelism=1"}
	batch, err := json.Marshal([]map[string]any{
		{"destination": env.Endpoint.URL("/ok"), "headers": flow, "body": "e"},
		{"destination": env.Endpoint.URL("/ok"), "headers": flow, "body": "f"},
	})
	require.NoError(t, err)
	r = env.call(t, http.MethodPost, "/v2/batch", batch, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)

	const delivered, failed, retried = 5 + 1 + 2, 3 + 2, 2 * 2
	var m map[string]*dto.MetricFamily
	eventually(t, "every outcome recorded and every attempt released", func() bool {
		m = env.scrape(t, "")
		done := value(t, m, "duraton_delivery_outcomes_total", "result", "delivered") +
			value(t, m, "duraton_delivery_outcomes_total", "result", "failed")
		return done == delivered+failed && value(t, m, "duraton_deliveries_in_flight") == 0
	})

	require.Equal(t, float64(5+3+2+1+2), value(t, m, "duraton_messages_published_total", "kind", "message"))
	require.Equal(t, float64(0), value(t, m, "duraton_messages_published_total", "kind", "workflow"))
	require.Equal(t, float64(1), value(t, m, "duraton_messages_deduplicated_total"))
	require.Equal(t, float64(delivered), value(t, m, "duraton_delivery_outcomes_total", "result", "delivered"))
	require.Equal(t, float64(failed), value(t, m, "duraton_delivery_outcomes_total", "result", "failed"))
	require.Equal(t, float64(retried), value(t, m, "duraton_delivery_outcomes_total", "result", "retried"))
	require.Equal(t, float64(delivered), value(t, m, "duraton_delivery_attempt_duration_seconds", "verdict", "delivered"))
	require.Equal(t, float64(3+2*3), value(t, m, "duraton_delivery_attempt_duration_seconds", "verdict", "retryable"))
	require.Equal(t, float64(0), value(t, m, "duraton_delivery_attempt_duration_seconds", "verdict", "final"))
	for _, r := range []string{"parallelism", "rate", "paused", "ceiling", "engine_cap", "other"} {
		require.Equal(t, float64(0), value(t, m, "duraton_flow_waiting", "reason", r), r)
		require.Equal(t, float64(0), value(t, m, "duraton_flow_waiting_keys", "reason", r), r)
	}
	require.Equal(t, float64(0), value(t, m, "duraton_workflow_runs_started_total"))
	require.Len(t, env.Endpoint.all(), delivered+3+2*3, "the endpoint saw every attempt")
	require.Positive(t, value(t, m, "duraton_store_commit_ops"))
	require.Positive(t, value(t, m, "duraton_store_commit_duration_seconds"))
	if !onPostgres() { // the size of the bbolt file
		require.Positive(t, value(t, m, "duraton_store_size_bytes"))
	}
	require.Contains(t, m, "go_goroutines")

	// No label carries a key, a URL, a project or an id.
	for name, f := range m {
		for _, s := range f.Metric {
			for _, l := range s.Label {
				require.NotContains(t, l.GetValue(), "127.0.0.1", "%s", name)
				require.NotEqual(t, "k", l.GetValue(), "%s", name)
				require.NotEqual(t, testProject, l.GetValue(), "%s", name)
			}
		}
	}
}

func TestMetricsToken(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{metricsToken: "scrape-secret"})

	for name, auth := range map[string]string{
		"Missing":  "",
		"Wrong":    "Bearer nope",
		"APIToken": "Bearer " + testToken,
		"NoBearer": "scrape-secret",
	} {
		t.Run(name, func(t *testing.T) {
			req := env.request(t, http.MethodGet, "/metrics", nil)
			req.Header.Del("Authorization")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			r := env.send(t, req)
			require.Equal(t, http.StatusUnauthorized, r.Status)
			require.Contains(t, r.errorMessage(t), "bearer token")
			require.NotContains(t, string(r.Body), "duraton_")
		})
	}
	m := env.scrape(t, "scrape-secret")
	require.Contains(t, m, "duraton_messages_published_total")
}

// TestMetricsWorkflowRuns: runs started, and ended by state (failed at the first
// delivery, cancelled, completed), each counted once.
func TestMetricsWorkflowRuns(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	env.trigger(t, "wfr_m_fail", env.Endpoint.URL("/not-a-workflow"), "p", "upstash-retries", "0")
	env.trigger(t, "wfr_m_cancel", env.Endpoint.URL("/later"), "p", "upstash-delay", "1h")
	env.trigger(t, "wfr_m_done", env.Endpoint.URL("/later"), "p", "upstash-delay", "1h")
	env.eventuallyRunState(t, "wfr_m_fail", "RUN_FAILED")
	r := env.call(t, http.MethodDelete, "/v2/workflows/runs/wfr_m_cancel?cancel=true", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/wfr_m_done", []byte(`"result"`), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/wfr_m_done?cancel=true", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "cancelling an ended run changes nothing: %s", r.Body)
	require.Equal(t, `{"error":"workflowRun wfr_m_done not found"}`, strings.TrimSpace(string(r.Body)))

	var m map[string]*dto.MetricFamily
	eventually(t, "the failed run counted (after its commit)", func() bool {
		m = env.scrape(t, "")
		return value(t, m, "duraton_workflow_runs_ended_total", "state", "RUN_FAILED") == 1
	})
	require.Equal(t, float64(3), value(t, m, "duraton_workflow_runs_started_total"))
	require.Equal(t, float64(3), value(t, m, "duraton_messages_published_total", "kind", "workflow"))
	require.Equal(t, float64(1), value(t, m, "duraton_workflow_runs_ended_total", "state", "RUN_FAILED"))
	require.Equal(t, float64(1), value(t, m, "duraton_workflow_runs_ended_total", "state", "RUN_CANCELED"))
	require.Equal(t, float64(1), value(t, m, "duraton_workflow_runs_ended_total", "state", "RUN_SUCCESS"))
}

// TestMetricsWaitingGauges: deliveries held by a paused flow-control key show in the
// waiting gauges under reason "paused", and leave them when the key resumes.
func TestMetricsWaitingGauges(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	r := env.call(t, http.MethodPost, "/v2/flowControl/held/pause", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = env.publish(t, env.Endpoint.URL("/held"), []byte("w"), "Upstash-Flow-Control-Key", "held", "Upstash-Flow-Control-Value", "parallelism=5")
	}
	var m map[string]*dto.MetricFamily
	eventually(t, "three deliveries waiting on the paused key", func() bool {
		m = env.scrape(t, "")
		return value(t, m, "duraton_flow_waiting", "reason", "paused") == 3
	})
	require.Equal(t, float64(1), value(t, m, "duraton_flow_waiting_keys", "reason", "paused"))
	require.Equal(t, float64(0), value(t, m, "duraton_flow_waiting", "reason", "parallelism"))
	require.Equal(t, float64(0), value(t, m, "duraton_deliveries_in_flight"))
	require.Empty(t, env.Endpoint.all(), "nothing was sent while paused")

	r = env.call(t, http.MethodPost, "/v2/flowControl/held/resume", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for _, id := range ids {
		env.Endpoint.waitMessage(t, id)
	}
	eventually(t, "the waitlist empty and every outcome recorded", func() bool {
		m = env.scrape(t, "")
		return value(t, m, "duraton_delivery_outcomes_total", "result", "delivered") == 3
	})
	require.Equal(t, float64(0), value(t, m, "duraton_flow_waiting", "reason", "paused"))
	require.Equal(t, float64(0), value(t, m, "duraton_flow_waiting_keys", "reason", "paused"))
}
