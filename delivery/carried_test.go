package delivery

import "github.com/duraton/duraton/delivery/internal/sched"

// carriedBytes is the scheduler's carried-body budget in use.
func carriedBytes(e *Engine) int64 {
	var n int64
	e.disp.locked(func(s *sched.Scheduler) { n = s.Carried() })
	return n
}
