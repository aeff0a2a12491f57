package delivery

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Inline answers (wire.HeaderInline): a workflow endpoint answers a delivery with the
// steps it would publish, or with the run's result, instead of calling the API and then
// answering. The step publish and the delivery's outcome are then one exchange and one
// transaction instead of two of each; what is stored is what the API calls would store.
//
// A crash before the outcome's commit loses the answer, and the delivery is sent again
// (its step runs again): the same at-least-once as a crash between a step publish and
// the delivery's outcome. Nothing was acknowledged to anyone before the commit.

// InlineParser reads the step messages of an inline answer, the JSON array of a
// POST /v2/batch, into publications in m's project. The server provides it so that they
// are parsed and validated exactly as its batch endpoint does. The publications it
// returns are only read.
type InlineParser func(m *Message, batch []byte) ([]Publication, error)

// inlineOffer is what the engine offers on a delivery to a run's workflow URL.
type inlineOffer struct {
	parse    InlineParser
	maxBytes int64
	header   []string // the offer's header value, shared (never modified)
}

// AcceptInlineSteps makes the engine offer inline answers on deliveries to a run's
// workflow URL: parse reads their step messages, and an answer may have up to maxBytes.
// Call it before Start.
func (e *Engine) AcceptInlineSteps(parse InlineParser, maxBytes int64) error {
	if parse == nil || maxBytes <= 0 {
		return errors.New("delivery: AcceptInlineSteps needs a parser and a positive size limit")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("delivery: AcceptInlineSteps after Start")
	}
	e.inline = &inlineOffer{parse: parse, maxBytes: maxBytes, header: []string{strconv.FormatInt(maxBytes, 10)}}
	return nil
}

// offersInline reports whether a delivery of m offers the inline answer.
func (e *Engine) offersInline(m *Message) bool {
	return e.inline != nil && isWorkflowDelivery(m)
}

// inlineAnswer is an endpoint's inline answer: its steps, or the run's end, which may
// come with the run's last steps.
type inlineAnswer struct {
	kind string // wire.InlineSteps or wire.InlineEnd
	body []byte // the steps' batch JSON, or the run's result
	// steps is an InlineEnd answer's step messages (wire.HeaderInlineSteps), recorded in
	// the run's history, not delivered.
	steps []byte
	// pubs are the steps, parsed and prepared (ids and due times assigned) before the
	// outcome's transaction, which only reads them.
	pubs []Publication
}

// inlineRefusedError is an inline answer the run cannot take (a limit of the run): the
// delivery then fails for good, as it does when the SDK's publish is refused with 412.
type inlineRefusedError struct{ err error }

func (e *inlineRefusedError) Error() string { return "inline answer refused: " + e.err.Error() }
func (e *inlineRefusedError) Unwrap() error { return e.err }

// prepareInline parses an inline answer's steps. An answer Duraton cannot use fails the
// delivery for good, with the reason in its log (the SDK would have had a 4xx from the
// API and failed the delivery with it).
func (e *Engine) prepareInline(m *Message, out Outcome, now time.Time) Outcome {
	in := out.inline
	steps := in.body
	switch in.kind {
	case wire.InlineEnd:
		if in.steps == nil {
			return out
		}
		steps = in.steps
	case wire.InlineSteps:
	default:
		return refusedInline(out, fmt.Errorf("%s: unknown kind %q (want %q or %q)", wire.HeaderInline, in.kind, wire.InlineSteps, wire.InlineEnd))
	}
	pubs, err := e.inline.parse(m, steps)
	if err != nil {
		return refusedInline(out, err)
	}
	if len(pubs) == 0 {
		return refusedInline(out, errors.New("no step messages"))
	}
	if len(pubs) > e.cfg.MaxParallelSteps {
		return refusedInline(out, fmt.Errorf("%w: %d step messages, the limit is %d", ErrRunLimit, len(pubs), e.cfg.MaxParallelSteps))
	}
	for i, p := range pubs {
		// Only the run's own steps: an answer cannot start runs, fill queues or reach
		// other runs, which a publish with the project's token could.
		switch {
		case p.Message.RunID != m.RunID:
			return refusedInline(out, fmt.Errorf("step message %d is for run %q, not this delivery's run", i, p.Message.RunID))
		case p.Init != nil:
			return refusedInline(out, fmt.Errorf("step message %d starts a run", i))
		case p.Message.Queue != "" || p.Message.DedupID != "":
			return refusedInline(out, fmt.Errorf("step message %d names a queue or a deduplication id", i))
		}
		prepare(p.Message, e.ids.New(storage.PrefixMessage, now), now)
	}
	in.pubs = pubs
	return out
}

// refusedInline is the outcome of a delivery whose inline answer was refused.
func refusedInline(out Outcome, err error) Outcome {
	out.Verdict, out.Fault, out.inline = Final, FaultDestination, nil
	out.Response.Error = "inline answer refused: " + err.Error()
	return out
}

// inlineTx stores an inline answer in the outcome's transaction: the steps, attached to
// the run as a publish attaches them, or the run's successful end. A run that ended
// meanwhile takes nothing (the SDK would have been told 400 and stopped quietly).
func (e *Engine) inlineTx(tx *storage.Tx, m *Message, in *inlineAnswer, now time.Time) (effects, error) {
	var fx effects
	end := in.kind == wire.InlineEnd
	for _, p := range in.pubs {
		step := *p.Message // the answer is only read: this run of the transaction works on a copy
		ok, err := e.hooks.attach(tx, &step, nil, now)
		switch {
		case errors.Is(err, ErrRunEnded) || errors.Is(err, ErrRunNotFound):
			return effects{}, nil // every step is for this run: none was stored
		case errors.Is(err, ErrRunLimit):
			return fx, &inlineRefusedError{err}
		case err != nil:
			return fx, err
		case !ok:
			continue // already recorded (a redelivery's answer)
		}
		if end {
			// Recorded in the history only: the run ends in this transaction, so its
			// delivery would have nothing to do.
			if err := tx.UnlinkRunMessage(step.Project, step.RunID, step.ID); err != nil {
				return fx, err
			}
			continue
		}
		if err := putNew(tx, &step, e.createdLog(&step, now)); err != nil {
			return fx, err
		}
		fx.add = append(fx.add, storage.DueWith(&step))
		fx.inlined++
	}
	if !end {
		return fx, nil
	}
	run, err := tx.Run(m.Project, m.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return fx, nil
	}
	if err != nil || !run.Live() {
		return fx, err
	}
	run.Response, run.HasResp = in.body, len(in.body) > 0
	return e.wf.endRunTx(tx, m.Project, run, RunSuccess, "", now)
}
