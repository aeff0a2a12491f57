package aimeter

import (
	"errors"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// tokenThrottle (docs/protocol.md, "AI steps and spend controls"): a run's start passes
// its scope's token bucket in the engine's scheduler (delivery/internal/sched/tokengate.go);
// here the bucket is kept durable and in step with what the run's AI steps spend. Every
// change is a TAT shift, made in the transaction that causes it and then applied by the
// engine to the scheduler's copy (Adj):
//   - the start's reservation (the scope's average tokens per run), before the request
//     leaves (BookTx);
//   - each AI step's actual tokens, when its result is recorded (AddRunUsageTx);
//   - the reservation given back, and the run's tokens counted into the scope's
//     average, when the run ends (EndTx).

// Adj is one change of a bucket for the scheduler: a TAT shift (ns) and, when a run
// ended, the scope's new average tokens per run (-1: unchanged).
type Adj struct {
	Project, Key string
	Shift, Avg   int64
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

// BookTx makes a start's reservation durable (the scheduler made it at admission) and
// marks the run started through its gate, with what it reserved.
func BookTx(tx *storage.Tx, project, runID, key string, reserve int64, now time.Time) error {
	run, err := tx.Run(project, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil || run.TokenGate == nil || run.TokenStarted {
		return err // a redelivery after a crash: booked already
	}
	b, err := tx.TokenBucket(project, key)
	if err != nil {
		return err
	}
	if err := tx.PutTokenBucket(project, key, shiftBucket(b, run.TokenGate.Debit(reserve), now), now); err != nil {
		return err
	}
	run.TokenStarted, run.TokenReserved = true, reserve
	return tx.PutRun(project, run)
}

// AddRunUsageTx adds an AI step's usage to its run's spend and debits it from the run's
// tokenThrottle bucket. It must run before anything else of the transaction rewrites the
// run (the run record carries the history cursor).
func AddRunUsageTx(tx *storage.Tx, project, runID string, u flowctl.AIUsage, now time.Time) (*Adj, error) {
	run, err := tx.Run(project, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil // swept meanwhile
	}
	if err != nil {
		return nil, err
	}
	adj, err := debitTx(tx, project, run, u.Tokens, now)
	if err != nil {
		return nil, err
	}
	total := flowctl.AIUsage{}
	if run.AIUsage != nil {
		total = *run.AIUsage
	}
	total.Add(u)
	run.AIUsage = &total
	return adj, tx.PutRun(project, run)
}

// debitTx debits an AI step's tokens from its run's bucket.
func debitTx(tx *storage.Tx, project string, run *storage.Run, tokens int64, now time.Time) (*Adj, error) {
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
	return &Adj{Project: project, Key: g.Key, Shift: d, Avg: -1}, nil
}

// EndTx gives an ending run's reservation back to its bucket and counts its tokens into
// the scope's average (once: a replayed run is not counted again). run is written by the
// caller.
func EndTx(tx *storage.Tx, project string, run *storage.Run, now time.Time) (*Adj, error) {
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
	return &Adj{Project: project, Key: g.Key, Shift: d, Avg: b.Average()}, nil
}
