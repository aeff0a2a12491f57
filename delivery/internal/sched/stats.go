package sched

import "strings"

// WaitReasons are the reason classes Stats counts waiting deliveries by: the kind of
// constraint a waitlist's head waits for, without the key it names (metrics keep
// bounded labels).
var WaitReasons = []string{"parallelism", "rate", "paused", "ceiling", "engine_cap", "other"}

// Stats is a snapshot of the scheduler's load.
type Stats struct {
	InFlight int            // deliveries started and not yet finished
	Waiting  int            // deliveries in flow-control waitlists
	ByReason map[string]int // Waiting, by what each waitlist's head waits for
	Blocked  map[string]int // waitlists whose head waits, by reason
}

// Stats counts the waitlists: O(keys held), for a scrape, not for the hot path.
func (s *Scheduler) Stats() Stats {
	st := Stats{InFlight: s.inFlight, ByReason: map[string]int{}, Blocked: map[string]int{}}
	for _, q := range s.flow.queues {
		n := q.waiting.Len()
		if n == 0 {
			continue
		}
		r := reasonClass(q.blockedBy)
		st.Waiting += n
		st.ByReason[r] += n
		st.Blocked[r]++
	}
	return st
}

// reasonClass maps a blocking constraint's description ("parallelism(key=k) <= 2") to its
// class.
func reasonClass(blockedBy string) string {
	if blockedBy == "engine in-flight cap" {
		return "engine_cap"
	}
	class, _, _ := strings.Cut(blockedBy, "(")
	switch class {
	case "parallelism", "rate", "paused", "ceiling":
		return class
	}
	return "other"
}
