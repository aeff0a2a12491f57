package sdk

import (
	"encoding/json"
	"fmt"
)

// Branch is one step of a parallel group (see Parallel).
type Branch interface {
	branch() *branchSpec
}

type branchSpec struct {
	name   string
	run    func() (any, error)
	record func(recordedStep) error
}

// Pending is a Run step of a parallel group and, after Parallel returned, its result.
type Pending[T any] struct {
	spec   branchSpec
	result T
}

func (p *Pending[T]) branch() *branchSpec { return &p.spec }

// Result is the branch's result once Parallel returned nil.
func (p *Pending[T]) Result() T { return p.result }

// Go declares a Run step to execute in parallel with others (see Parallel).
func Go[T any](name string, fn func() (T, error)) *Pending[T] {
	p := &Pending[T]{}
	p.spec = branchSpec{
		name: name,
		run:  func() (any, error) { return fn() },
		record: func(s recordedStep) error {
			v, err := decodeOut[T](s)
			p.result = v
			return err
		},
	}
	return p
}

// Parallel runs the branches as one parallel group: each executes in a delivery of its
// own, concurrently, and Parallel returns once all have results (docs/protocol.md, "Steps"). It is
// the Go form of Promise.all over context.run.
func (c *Context) Parallel(branches ...Branch) error {
	n := len(branches)
	if n == 0 {
		return nil
	}
	c.flushDeferred() // a step before the group ends this delivery (inline.go)
	first := c.next
	c.next += n
	// All results recorded: the group is done (replay or the "last" delivery).
	done := 0
	for i, b := range branches {
		if s, ok, err := c.recorded(first+i, b.branch().name, "Run"); err != nil {
			return err
		} else if ok {
			if err := b.branch().record(s); err != nil {
				return err
			}
			done++
		}
	}
	if done == n {
		return nil
	}
	// This delivery ends with one of the group's plan steps: run that branch.
	if c.last.StepID == 0 && c.last.TargetStep >= first && c.last.TargetStep < first+n {
		target := c.last.TargetStep
		b := branches[target-first].branch()
		if c.last.StepName != b.name {
			return mismatch(target, b.name, "Run", c.last.StepName, c.last.StepType)
		}
		if _, ok := c.steps[target]; !ok {
			v, err := b.run()
			if err != nil {
				return err
			}
			out, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("step %q: encode result: %w", b.name, err)
			}
			c.schedule(stepMessage{body: stepObject(target, b.name, "Run", string(out), n)})
		}
		panic(stepDone{condition: "success"})
	}
	// Plans already published: results are on their way ("discard").
	if _, planned := c.plans[first]; planned {
		panic(stepDone{condition: "discard"})
	}
	// First time here: publish one plan step per branch in one batch.
	msgs := make([]stepMessage, n)
	for i, b := range branches {
		msgs[i] = stepMessage{body: map[string]any{"stepId": 0, "stepName": b.branch().name, "stepType": "Run", "concurrent": n, "targetStep": first + i}}
	}
	c.schedule(msgs...)
	return nil
}
