package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/duraton/duraton/delivery"
)

// WatchEngine registers the engine's gauges, read from stats at each scrape: deliveries
// in flight, and deliveries in flow-control waitlists (and the waitlists themselves) by
// what their key's head waits for.
func (m *Metrics) WatchEngine(stats func() delivery.Stats) {
	m.reg.MustRegister(&engineCollector{stats: stats})
}

var (
	inFlightDesc = prometheus.NewDesc(namespace+"_deliveries_in_flight",
		"Delivery attempts (and due timers) running now.", nil, nil)
	waitingDesc = prometheus.NewDesc(namespace+"_flow_waiting",
		"Deliveries in flow-control waitlists now, by what their key's first delivery waits for (parallelism, rate, paused, ceiling, engine_cap, other).", []string{"reason"}, nil)
	waitingKeysDesc = prometheus.NewDesc(namespace+"_flow_waiting_keys",
		"Flow-control waitlists holding deliveries now, by what their first delivery waits for.", []string{"reason"}, nil)
)

// engineCollector reads one snapshot per scrape, so the gauges agree with each other.
type engineCollector struct {
	stats func() delivery.Stats
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- waitingDesc
	ch <- waitingKeysDesc
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(st.InFlight))
	for _, r := range delivery.WaitReasons {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(st.ByReason[r]), r)
		ch <- prometheus.MustNewConstMetric(waitingKeysDesc, prometheus.GaugeValue, float64(st.Blocked[r]), r)
	}
}
