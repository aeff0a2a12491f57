package native

import (
	"errors"
	"fmt"
	"sync"

	"github.com/duraton/duraton/storage"
)

// Bounds on the work of POST /events: every event starts a run of each workflow it
// triggers, all in one transaction, so the runs one request may create and those one
// project's requests may be creating at once are capped. Memory then stays bounded by the
// settings, not by what a request asks for.
var (
	// ErrTooManyRuns is a request that would create more runs than
	// Config.MaxRunsPerRequest (413); nothing of it is stored.
	ErrTooManyRuns = errors.New("too many runs for one request")
	// ErrBusy is a request that finds its project's event requests already creating
	// Config.MaxRunsInFlight runs (429: retry shortly); nothing of it is stored.
	ErrBusy = errors.New("too many runs being created")
)

// fanOut is the most runs events can create: one per event and workflow it triggers
// (gates may start fewer, never more).
func (s *Service) fanOut(project string, events []EventIn) (int, error) {
	perName := map[string]int{}
	total := 0
	err := s.store.View(func(tx *storage.Tx) error {
		for _, in := range events {
			n, ok := perName[in.Name]
			if !ok {
				var err error
				if n, err = tx.TriggerCount(project, in.Name); err != nil {
					return err
				}
				perName[in.Name] = n
			}
			total += n
		}
		return nil
	})
	return total, err
}

// tooManyRuns is the error of a request whose fan-out is over the per-request limit.
func (s *Service) tooManyRuns(runs int) error {
	return fmt.Errorf("%w: the request would start up to %d workflow runs (each event starts one per workflow it triggers), the limit is %d per request: send fewer events per request",
		ErrTooManyRuns, runs, s.cfg.MaxRunsPerRequest)
}

// runBudget counts the runs each project's event requests are creating now.
type runBudget struct {
	mu    sync.Mutex
	limit int
	used  map[string]int
}

func newRunBudget(limit int) *runBudget { return &runBudget{limit: limit, used: map[string]int{}} }

// take reserves n runs of project's budget; release gives them back. A request of no
// runs takes nothing.
func (b *runBudget) take(project string, n int) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if used := b.used[project]; used+n > b.limit {
		return nil, fmt.Errorf("%w: this project's event requests are creating %d workflow runs now, and this one would add up to %d: the limit in flight is %d; retry shortly",
			ErrBusy, used, n, b.limit)
	}
	b.used[project] += n
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.used[project] -= n; b.used[project] <= 0 {
			delete(b.used, project)
		}
	}, nil
}
