package delivery

import (
	"context"

	"github.com/duraton/duraton/storage"
)

// RunStates counts a project's newest runs (at most limit of them) by state. more is true
// when older runs were left uncounted. It reads run records only, never histories, so
// the console's overview stays cheap on a project with long runs.
func (e *Engine) RunStates(ctx context.Context, project string, limit int) (counts map[string]int, more bool, err error) {
	type result struct {
		counts map[string]int
		more   bool
	}
	res, err := view(ctx, e.store, func(tx *storage.Tx) (result, error) {
		runs, next, err := tx.ListRuns(project, nil, limit, func(*Run) bool { return true })
		if err != nil {
			return result{}, err
		}
		r := result{counts: map[string]int{}, more: next != nil}
		for i := range runs {
			r.counts[runs[i].State]++
		}
		return r, nil
	})
	return res.counts, res.more, err
}
