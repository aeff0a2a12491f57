package metrics

import "github.com/prometheus/client_golang/prometheus"

// Replica registers the metrics of a replica on PostgreSQL (serve --store): whether this
// process leads, and how the requests it forwarded to the leader ended. It returns the
// forward observer (server/replica's Config.OnForward); results are counted as given.
func (m *Metrics) Replica(leading func() bool, results ...string) func(result string) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "replica_leader",
		Help: "1 while this replica leads at least one shard (runs its delivery engine), else 0.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	}))
	forwards := factory{m.reg}.counterVec("replica_forwards_total",
		"Requests this replica forwarded to the leader of their shard, by result: ok (the leader answered), bad_gateway, no_leader.", "result")
	for _, r := range results {
		forwards.WithLabelValues(r) // from zero, for rate()
	}
	return func(result string) { forwards.WithLabelValues(result).Inc() }
}
