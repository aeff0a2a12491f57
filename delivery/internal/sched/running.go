package sched

// Running reports whether the message is in flight now (for run status reads).
func (s *Scheduler) Running(messageID string) bool {
	_, ok := s.running[messageID]
	return ok
}
