package server

import (
	"fmt"
	"net/http"

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
	p := h.parser()
	for i, e := range entries {
		pub, err := h.inlineStep(p, m, e)
		if err != nil {
			return nil, fmt.Errorf("step message %d: %w", i, err)
		}
		pubs[i] = pub
	}
	return pubs, nil
}

func (h *publishHandlers) inlineStep(p messageParser, src *delivery.Message, e wire.BatchEntry) (delivery.Publication, error) {
	header := batchHeader(e.Headers)
	if err := checkHeaderMap("", header); err != nil {
		return delivery.Publication{}, err
	}
	if int64(len(e.Body)) > h.cfg.MaxBodyBytes {
		return delivery.Publication{}, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body exceeds the limit of %d bytes", h.cfg.MaxBodyBytes)}
	}
	if e.Queue != "" || header.Get(wire.HeaderQueueName) != "" {
		return delivery.Publication{}, badRequest("a step message names no queue")
	}
	if header.Get(headerCron) != "" {
		return delivery.Publication{}, headerError(headerCron, "a step message has no cron")
	}
	m, err := p.parse(header, e.Destination)
	if err != nil {
		return delivery.Publication{}, err
	}
	m.Project, m.Body, m.CallerIP = src.Project, []byte(e.Body), src.CallerIP
	init, err := p.workflow(header, m)
	if err != nil {
		return delivery.Publication{}, err
	}
	return delivery.Publication{Message: m, Init: init}, nil
}
