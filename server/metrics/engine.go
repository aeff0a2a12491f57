package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/duraton/duraton/delivery"
)

// WatchEngine adds an engine to the gauges read at each scrape: deliveries in flight,
// and deliveries in flow-control waitlists (and the waitlists themselves) by what their
// key's head waits for. A replica leading several shards runs an engine per shard: the
// gauges are their sums. The returned func removes the engine (its shard was handed
// over).
func (m *Metrics) WatchEngine(stats func() delivery.Stats) (remove func()) {
	m.enginesOnce.Do(func() { m.reg.MustRegister(&engineCollector{engines: &m.engines}) })
	return m.engines.add(stats)
}

// engineSet is the engines a scrape reads.
type engineSet struct {
	mu   sync.Mutex
	next int
	m    map[int]func() delivery.Stats
}

func (s *engineSet) add(stats func() delivery.Stats) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int]func() delivery.Stats{}
	}
	id := s.next
	s.next++
	s.m[id] = stats
	return func() {
		s.mu.Lock()
		delete(s.m, id)
		s.mu.Unlock()
	}
}

// sum reads every engine's stats and adds them up.
func (s *engineSet) sum() (total delivery.Stats) {
	s.mu.Lock()
	reads := make([]func() delivery.Stats, 0, len(s.m))
	for _, f := range s.m {
		reads = append(reads, f)
	}
	s.mu.Unlock()
	total.ByReason, total.Blocked = map[string]int{}, map[string]int{}
	for _, read := range reads {
		st := read()
		total.InFlight += st.InFlight
		total.Waiting += st.Waiting
		for r, n := range st.ByReason {
			total.ByReason[r] += n
		}
		for r, n := range st.Blocked {
			total.Blocked[r] += n
		}
	}
	return total
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
	engines *engineSet
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- waitingDesc
	ch <- waitingKeysDesc
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.engines.sum()
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(st.InFlight))
	for _, r := range delivery.WaitReasons {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(st.ByReason[r]), r)
		ch <- prometheus.MustNewConstMetric(waitingKeysDesc, prometheus.GaugeValue, float64(st.Blocked[r]), r)
	}
}
