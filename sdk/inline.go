package sdk

import (
	"net/http"

	"github.com/duraton/duraton/sdk/wire"
)

// Inline answers (wire.HeaderInline, Duraton's protocol extension). A delivery that
// offers one is answered with the steps the route would publish, or with the run's
// result, instead of an API call followed by the usual answer: one exchange per step
// instead of two. Duraton records the answer with the delivery's outcome, so what it
// stores is the same; a delivery without the offer (QStash, an older Duraton) gets the
// API calls as before.

// inlineReply is the inline answer a delivery will give.
type inlineReply struct {
	kind string // wire.InlineSteps or wire.InlineEnd
	body []byte
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

// done answers a delivery that did its work: with its inline answer when it made one.
func (h *handler) done(w http.ResponseWriter, c *Context, condition string) {
	if c.inline == nil {
		h.ok(w, c.RunID, condition)
		return
	}
	w.Header().Set(wire.HeaderInline, c.inline.kind)
	w.Header().Set(wire.HeaderContentType, "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.inline.body)
}
