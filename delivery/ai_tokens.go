package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

// tokenThrottle (flow-control.md §B): a run's start passes its scope's token bucket in
// the scheduler (internal/sched/tokengate.go); here the engine keeps the bucket durable and in
// step with what the run's AI steps spend. Every change is a TAT shift, made in the
// transaction that causes it and then applied to the scheduler's copy (effects.tokens):
//   - the start's reservation (the scope's average tokens per run), before the request
//     leaves (bookTokens);
//   - each AI step's actual tokens, when its result is recorded (debitTokensTx);
//   - the reservation given back, and the run's tokens counted into the scope's
//     average, when the run ends (endTokensTx).

// tokenAdj is one change of a bucket for the scheduler: a TAT shift (ns) and, when a run
// ended, the scope's new average tokens per run (-1: unchanged).
type tokenAdj struct {
	project, key string
	shift, avg   int64
}

// applyTokens applies bucket changes to the scheduler; a credit may start waiting runs.
func applyTokens(s *sched.Scheduler, adjs []tokenAdj, now time.Time) []sched.Start {
	var starts []sched.Start
	for _, a := range adjs {
		s.AdjustTokens(a.project, a.key, a.shift, a.avg, now, &starts)
	}
	return starts
}

// shiftBucket applies a TAT shift to a stored bucket as the scheduler does.
func shiftBucket(b storage.TokenBucket, d int64, now time.Time) storage.TokenBucket {
	if d > 0 {
		b.TAT = max(b.TAT, now.UnixNano()) + d
	} else {
		b.TAT += d
	}
	return b
}

// bookTokens makes a start's reservation durable (the scheduler made it at admission)
// and marks the run started through its gate, with what it reserved.
func (e *Engine) bookTokens(ctx context.Context, m *Message, key string, reserve int64) error {
	now := e.now()
	_, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) {
		run, err := tx.Run(m.Project, m.RunID)
		if errors.Is(err, storage.ErrNotFound) {
			return struct{}{}, nil
		}
		if err != nil || run.TokenGate == nil || run.TokenStarted {
			return struct{}{}, err // a redelivery after a crash: booked already
		}
		b, err := tx.TokenBucket(m.Project, key)
		if err != nil {
			return struct{}{}, err
		}
		if err := tx.PutTokenBucket(m.Project, key, shiftBucket(b, run.TokenGate.Debit(reserve), now), now); err != nil {
			return struct{}{}, err
		}
		run.TokenStarted, run.TokenReserved = true, reserve
		return struct{}{}, tx.PutRun(m.Project, run)
	})
	return err
}

// debitTokensTx debits an AI step's tokens from its run's bucket.
func debitTokensTx(tx *storage.Tx, project string, run *Run, tokens int64, now time.Time) (*tokenAdj, error) {
	g := run.TokenGate
	if g == nil || tokens <= 0 {
		return nil, nil
	}
	b, err := tx.TokenBucket(project, g.Key)
	if err != nil {
		return nil, err
	}
	d := g.Debit(tokens)
	if err := tx.PutTokenBucket(project, g.Key, shiftBucket(b, d, now), now); err != nil {
		return nil, err
	}
	return &tokenAdj{project: project, key: g.Key, shift: d, avg: -1}, nil
}

// endTokensTx gives an ending run's reservation back to its bucket and counts its tokens
// into the scope's average (once: a replayed run is not counted again). run is written by
// the caller.
func endTokensTx(tx *storage.Tx, project string, run *Run, now time.Time) (*tokenAdj, error) {
	g := run.TokenGate
	if g == nil || !run.TokenStarted {
		return nil, nil
	}
	b, err := tx.TokenBucket(project, g.Key)
	if err != nil {
		return nil, err
	}
	d := -g.Debit(run.TokenReserved)
	b = shiftBucket(b, d, now)
	b.Runs++
	if run.AIUsage != nil {
		b.RunTokens += run.AIUsage.Tokens
	}
	if err := tx.PutTokenBucket(project, g.Key, b, now); err != nil {
		return nil, err
	}
	run.TokenStarted, run.TokenReserved = false, 0
	return &tokenAdj{project: project, key: g.Key, shift: d, avg: b.Average()}, nil
}
