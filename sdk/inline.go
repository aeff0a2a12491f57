package sdk

import (
	"net/http"
	"strconv"

	"github.com/duraton/duraton/sdk/wire"
)

// Inline answers (wire.HeaderInline, Duraton's protocol extension). A delivery that
// offers one is answered with the steps the route would publish, or with the run's
// result, instead of an API call followed by the usual answer: one exchange per step
// instead of two. Duraton records the answer with the delivery's outcome, so what it
// stores is the same; a delivery without the offer (QStash, an older Duraton) gets the
// API calls as before.
//
// A Run step's result is deferred: the route goes on with it, as the next delivery would
// replay it, and the delivery ends at the route's next step (answering the result) or at
// the route's end (answering the result and the run's end together, so the run's last
// step needs no delivery of its own). Going on before the result is recorded is safe:
// the code between two steps runs again on every delivery anyway, and if the answer is
// lost the delivery comes again and the step runs again.

// inlineReply is the inline answer a delivery will give.
type inlineReply struct {
	kind  string // wire.InlineSteps or wire.InlineEnd
	body  []byte
	steps int // InlineEnd: the body's first steps bytes are step messages
}

// answerInline makes body (of kind) this delivery's answer if the delivery offered one
// that large; it reports whether it did. The caller then stops the delivery's work.
func (c *Context) answerInline(kind string, body []byte) bool {
	if c.inlineMax <= 0 || int64(len(body)) > c.inlineMax || c.inline != nil {
		return false
	}
	c.inline = &inlineReply{kind: kind, body: body}
	return true
}

// deferResult keeps a Run step's result message for this delivery's inline answer; it
// reports false (publish it now) when the delivery offers none or one is kept already.
func (c *Context) deferResult(msg stepMessage) bool {
	if c.inlineMax <= 0 || c.deferred != nil {
		return false
	}
	c.deferred = &msg
	return true
}

// takeDeferred takes the deferred result, if any.
func (c *Context) takeDeferred() (stepMessage, bool) {
	if c.deferred == nil {
		return stepMessage{}, false
	}
	msg := *c.deferred
	c.deferred = nil
	return msg, true
}

// flushDeferred ends the delivery with the deferred result, if any: the route reached a
// step that must wait for it to be recorded.
func (c *Context) flushDeferred() {
	if msg, ok := c.takeDeferred(); ok {
		c.schedule(msg)
	}
}

// endInline answers the route's end (result, JSON) inline, with the deferred result
// first when there is one. It reports false when the delivery offers no inline answer
// or the result alone does not fit (the caller ends the run through the API). A deferred
// result that does not fit together with the end is answered (or published) alone, and
// the next delivery ends the run.
func (c *Context) endInline(result []byte) (handled bool, err error) {
	msg, ok := c.takeDeferred()
	if !ok {
		return c.answerInline(wire.InlineEnd, result), nil
	}
	steps, err := c.batchJSON([]stepMessage{msg})
	if err != nil {
		return false, err
	}
	if c.answerInline(wire.InlineEnd, append(steps, result...)) {
		c.inline.steps = len(steps)
		return true, nil
	}
	return true, c.h.publishSteps(c, []stepMessage{msg})
}

// publishDeferred publishes (or answers inline) a deferred result the route's run did
// not flush: the route failed or stopped after it.
func (c *Context) publishDeferred() error {
	if msg, ok := c.takeDeferred(); ok {
		return c.h.publishSteps(c, []stepMessage{msg})
	}
	return nil
}

// done answers a delivery that did its work: with its inline answer when it made one.
func (h *handler) done(w http.ResponseWriter, c *Context, condition string) {
	if c.inline == nil {
		h.ok(w, c.RunID, condition)
		return
	}
	w.Header().Set(wire.HeaderInline, c.inline.kind)
	if c.inline.steps > 0 {
		w.Header().Set(wire.HeaderInlineSteps, strconv.Itoa(c.inline.steps))
	}
	w.Header().Set(wire.HeaderContentType, "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.inline.body)
}
