package metrics

import (
	"crypto/subtle"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/duraton/duraton/delivery"
)

const namespace = "duraton"

// Metrics is a registry of Duraton's collectors. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	published    *prometheus.CounterVec
	deduplicated prometheus.Counter
	attempts     *prometheus.HistogramVec
	outcomes     *prometheus.CounterVec
	runsStarted  prometheus.Counter
	runsEnded    *prometheus.CounterVec
	commitOps    prometheus.Histogram
	commitTime   prometheus.Histogram

	enginesOnce sync.Once
	engines     engineSet
	shardsOnce  sync.Once
	shardDone   *prometheus.CounterVec // attempts by shard (shards.go)
}

var _ delivery.Observer = (*Metrics)(nil)

// New builds the collectors, with the Go runtime and process collectors beside them.
// dataFile, if not empty, is the bbolt file whose size duraton_store_size_bytes reports.
func New(dataFile string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.published = f.counterVec("messages_published_total", "Messages stored by publish, batch, enqueue and workflow steps, by kind (message, workflow).", "kind")
	m.deduplicated = f.counter("messages_deduplicated_total", "Published messages not stored because their deduplication id (or run id) was already seen.")
	m.attempts = f.histogramVec("delivery_attempt_duration_seconds", "Duration of delivery attempts, by verdict of the answer (delivered, retryable, final).",
		prometheus.ExponentialBuckets(0.005, 2.5, 10), "verdict")
	m.outcomes = f.counterVec("delivery_outcomes_total", "Attempt outcomes recorded, by result: delivered, retried (a retry is scheduled), failed (dead-lettered or given up).", "result")
	m.runsStarted = f.counter("workflow_runs_started_total", "Workflow runs created.")
	m.runsEnded = f.counterVec("workflow_runs_ended_total", "Workflow runs that reached a final state, by state.", "state")
	m.commitOps = f.histogram("store_commit_ops", "Write functions committed together by one group commit.", prometheus.ExponentialBuckets(1, 2, 11))
	m.commitTime = f.histogram("store_commit_duration_seconds", "Duration of one group commit, fsync included.", prometheus.ExponentialBuckets(0.0005, 2, 12))
	if dataFile != "" {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "store_size_bytes", Help: "Size of the data file.",
		}, func() float64 {
			fi, err := os.Stat(dataFile)
			if err != nil {
				return -1 // unreadable: a value no real file has, rather than a stale one
			}
			return float64(fi.Size())
		}))
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Known label values start at zero, so a rate() over them works from the first scrape.
	for _, k := range []string{delivery.ObsMessage, delivery.ObsWorkflow} {
		m.published.WithLabelValues(k)
	}
	for _, v := range []string{delivery.ObsDelivered, delivery.ObsRetryable, delivery.ObsFinal} {
		m.attempts.WithLabelValues(v)
	}
	for _, r := range []string{resultDelivered, resultRetried, resultFailed} {
		m.outcomes.WithLabelValues(r)
	}
	for _, s := range []string{delivery.RunSuccess, delivery.RunFailed, delivery.RunCanceled} {
		m.runsEnded.WithLabelValues(s)
	}
	return m
}

// Registry is where the collectors live (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the text exposition. With a token, a scrape must send
// "Authorization: Bearer <token>"; anything else gets 401.
func (m *Metrics) Handler(token string) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"metrics: missing or wrong bearer token"}`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// OnCommit is storage.Options.OnCommit.
func (m *Metrics) OnCommit(ops int, took time.Duration) {
	m.commitOps.Observe(float64(ops))
	m.commitTime.Observe(took.Seconds())
}

const (
	resultDelivered = "delivered"
	resultRetried   = "retried"
	resultFailed    = "failed"
)

func (m *Metrics) Published(kind string, n int) { m.published.WithLabelValues(kind).Add(float64(n)) }
func (m *Metrics) Deduplicated(n int)           { m.deduplicated.Add(float64(n)) }
func (m *Metrics) Attempt(verdict string, took time.Duration) {
	m.attempts.WithLabelValues(verdict).Observe(took.Seconds())
}

func (m *Metrics) Recorded(state string) {
	switch state {
	case delivery.StateDelivered:
		m.outcomes.WithLabelValues(resultDelivered).Inc()
	case delivery.StateError:
		m.outcomes.WithLabelValues(resultRetried).Inc()
	case delivery.StateFailed:
		m.outcomes.WithLabelValues(resultFailed).Inc()
	}
}

func (m *Metrics) RunStarted()           { m.runsStarted.Inc() }
func (m *Metrics) RunEnded(state string) { m.runsEnded.WithLabelValues(state).Inc() }

// factory registers collectors under the namespace.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help, label string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, []string{label})
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, label string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, []string{label})
	f.reg.MustRegister(h)
	return h
}
