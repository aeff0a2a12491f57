package server

import (
	"fmt"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// inlineSteps reads the step messages of a workflow endpoint's inline answer
// (wire.HeaderInline) for the engine: the entries of a /v2/batch body, parsed and checked
// as the batch endpoint does, in the project of the delivery m answered. The engine
// checks that they are steps of m's run.
//
// What the batch endpoint takes from the request comes from the delivery instead: the
// project is the run's, the caller's address is the delivery's own (the one who published
// it), and the hop count is 0, as for the SDK's step publish (which carries no
// Duraton-Hops).
func (h *publishHandlers) inlineSteps(m *delivery.Message, raw []byte) ([]delivery.Publication, error) {
	entries, err := wire.DecodeBatch(raw)
	if err != nil {
		return nil, fmt.Errorf("the body must be a JSON array of {destination, headers, body}: %v", err)
	}
	if len(entries) > h.cfg.MaxBatchMessages {
		return nil, fmt.Errorf("%d step messages, the limit is %d", len(entries), h.cfg.MaxBatchMessages)
	}
	pubs := make([]delivery.Publication, len(entries))
	o := origin{project: m.Project, callerIP: m.CallerIP}
	for i, e := range entries {
		if pubs[i], err = h.inlineStep(o, e); err != nil {
			return nil, fmt.Errorf("step message %d: %w", i, err)
		}
	}
	return pubs, nil
}

// inlineStep is one step message of an inline answer: a batch entry without a queue.
func (h *publishHandlers) inlineStep(o origin, e wire.BatchEntry) (delivery.Publication, error) {
	header, body, err := h.entryParts(e)
	if err != nil {
		return delivery.Publication{}, err
	}
	if e.Queue != "" || header.Get(wire.HeaderQueueName) != "" {
		return delivery.Publication{}, badRequest("a step message names no queue")
	}
	return h.messageFrom(o, header, e.Destination, body, "")
}
