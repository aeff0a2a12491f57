package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/duraton/duraton/delivery"
)

// Shards registers the metrics of a replica that leads shards of a PostgreSQL database:
// how many it leads now (led is read at each scrape).
func (m *Metrics) Shards(led func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "replica_shards_led",
		Help: "Shards whose lease this replica holds and whose delivery engine it runs now.",
	}, func() float64 { return float64(led()) }))
	m.shardAttempts()
}

func (m *Metrics) shardAttempts() *prometheus.CounterVec {
	m.shardsOnce.Do(func() {
		m.shardDone = factory{m.reg}.counterVec("shard_delivery_attempts_total",
			"Delivery attempts this replica made, by shard: how the deliveries divide among replicas.", "shard")
	})
	return m.shardDone
}

// ForShard is the engine observer of one shard's engine: everything is counted as
// Metrics counts it, and each attempt also under the shard's label.
func (m *Metrics) ForShard(shard int) delivery.Observer {
	c := m.shardAttempts().WithLabelValues(strconv.Itoa(shard))
	return shardObserver{Metrics: m, attempts: c}
}

type shardObserver struct {
	*Metrics
	attempts prometheus.Counter
}

func (o shardObserver) Attempt(verdict string, took time.Duration) {
	o.attempts.Inc()
	o.Metrics.Attempt(verdict, took)
}
