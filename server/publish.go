package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// publishHandlers serve message ingestion: publish, enqueue and batch.
type publishHandlers struct {
	engine interface {
		PublishAll(ctx context.Context, pubs []delivery.Publication) ([]delivery.PublishResult, error)
	}
	cfg    Config
	limits publishLimits
	groups URLGroups // nil: a destination must be a URL
}

func (h *publishHandlers) register(g *echo.Group) {
	g.POST("/publish/*", h.publish)
	g.POST("/enqueue/:queue/*", h.enqueue)
	g.POST("/batch", h.batch)
}

func (h *publishHandlers) parser() messageParser {
	return messageParser{limits: h.limits, destinations: h.cfg.CheckDestination, now: h.cfg.Now()}
}

// rawDestination takes the destination from the raw request URI after prefix: the SDKs
// append the URL unescaped, with its own query string, and "//" must survive.
func rawDestination(r *http.Request, prefix string) string {
	dest := strings.TrimPrefix(r.RequestURI, prefix)
	if !strings.Contains(dest, "://") {
		if un, err := url.PathUnescape(dest); err == nil {
			dest = un
		}
	}
	return dest
}

func (h *publishHandlers) publish(c echo.Context) error {
	return h.publishOne(c, rawDestination(c.Request(), "/v2/publish/"), "")
}

func (h *publishHandlers) enqueue(c echo.Context) error {
	rest := strings.TrimPrefix(c.Request().RequestURI, "/v2/enqueue/")
	queue, _, _ := strings.Cut(rest, "/")
	if err := validQueueName(queue); err != nil {
		return err
	}
	return h.publishOne(c, rawDestination(c.Request(), "/v2/enqueue/"+queue+"/"), queue)
}

func (h *publishHandlers) publishOne(c echo.Context, dest, queue string) error {
	if q := c.Request().Header.Get(wire.HeaderQueueName); queue == "" && q != "" {
		if err := validQueueName(q); err != nil {
			return err
		}
		queue = q
	}
	body, err := readBody(c, h.cfg.bodyLimit(c.Request().Header))
	if err != nil {
		return err
	}
	if h.groups != nil && isGroupDestination(dest) {
		if err := noFanOutFromDelivery(c, "a URL group's fan-out", 0); err != nil {
			return err
		}
		pubs, err := h.fanOut(c, c.Request().Header, dest, body, queue)
		if err != nil {
			return err
		}
		res, err := h.engine.PublishAll(c.Request().Context(), pubs)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, toPublishResponses(res))
	}
	pub, err := h.message(c, c.Request().Header, dest, body, queue)
	if err != nil {
		return err
	}
	res, err := h.engine.PublishAll(c.Request().Context(), []delivery.Publication{pub})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toPublishResponse(res[0]))
}

func (h *publishHandlers) batch(c echo.Context) error {
	raw, err := readBody(c, h.cfg.MaxBatchBytes)
	if err != nil {
		return err
	}
	entries, err := wire.DecodeBatch(raw)
	if err != nil {
		return badRequest("body must be a JSON array of {destination, headers, body, queue}: %v", err)
	}
	if len(entries) == 0 {
		return badRequest("batch is empty")
	}
	if len(entries) > h.cfg.MaxBatchMessages {
		return badRequest("batch has %d messages, the limit is %d", len(entries), h.cfg.MaxBatchMessages)
	}
	if err := noFanOutFromDelivery(c, fmt.Sprintf("a batch of %d", len(entries)), len(entries)); err != nil {
		return err
	}
	pubs := make([]delivery.Publication, 0, len(entries))
	fanned := make([]int, len(entries)) // publications of entry i; -1: one, answered as an object
	for i, e := range entries {
		header, body, err := h.entryParts(e)
		if err != nil {
			return prefixError(fmt.Sprintf("batch[%d]", i), err)
		}
		queue := e.Queue
		if queue != "" {
			if err := validQueueName(queue); err != nil {
				return prefixError(fmt.Sprintf("batch[%d]", i), err)
			}
		}
		if h.groups != nil && isGroupDestination(e.Destination) {
			if err := noFanOutFromDelivery(c, "a URL group's fan-out", 0); err != nil {
				return prefixError(fmt.Sprintf("batch[%d]", i), err)
			}
			group, err := h.fanOut(c, header, e.Destination, body, queue)
			if err != nil {
				return prefixError(fmt.Sprintf("batch[%d]", i), err)
			}
			if len(pubs)+len(group) > h.cfg.MaxBatchMessages {
				return badRequest("batch fans out to more than %d messages", h.cfg.MaxBatchMessages)
			}
			pubs, fanned[i] = append(pubs, group...), len(group)
			continue
		}
		pub, err := h.message(c, header, e.Destination, body, queue)
		if err != nil {
			return prefixError(fmt.Sprintf("batch[%d]", i), err)
		}
		pubs, fanned[i] = append(pubs, pub), -1
	}
	res, err := h.engine.PublishAll(c.Request().Context(), pubs)
	if err != nil {
		return err
	}
	if !hasGroupEntry(fanned) && c.QueryString() == "" && !c.Echo().Debug {
		// No URL group, no ?pretty: every entry made one message (a step publish).
		if buf, ok := appendPublishResults(make([]byte, 0, 96*len(res)), res); ok {
			return c.JSONBlob(http.StatusCreated, buf)
		}
	}
	// A URL group's entry answers with an array of its messages, as QStash does.
	out := make([]any, len(entries))
	for i, n := range fanned {
		if n < 0 {
			out[i], res = toPublishResponse(res[0]), res[1:]
			continue
		}
		out[i], res = toPublishResponses(res[:n]), res[n:]
	}
	return c.JSON(http.StatusCreated, out)
}

// hasGroupEntry reports whether an entry went to a URL group (answered as an array, even
// of one message).
func hasGroupEntry(fanned []int) bool {
	for _, n := range fanned {
		if n >= 0 {
			return true
		}
	}
	return false
}

func toPublishResponses(res []delivery.PublishResult) []wire.PublishResult {
	out := make([]wire.PublishResult, len(res))
	for i, r := range res {
		out[i] = toPublishResponse(r)
	}
	return out
}

// entryParts are a batch entry's headers and body, checked.
func (h *publishHandlers) entryParts(e wire.BatchEntry) (http.Header, []byte, error) {
	header := batchHeader(e.Headers)
	if err := checkHeaderMap("", header); err != nil {
		return nil, nil, err
	}
	if limit := h.cfg.bodyLimit(header); int64(len(e.Body)) > limit {
		return nil, nil, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body exceeds the limit of %d bytes", limit)}
	}
	return header, []byte(e.Body), nil
}

// origin is what a message takes from where it was published: the project, the
// caller's address and the hop count.
type origin struct {
	project, callerIP string
	hops              int
}

// requestOrigin is the origin of a message published by request c.
func requestOrigin(c echo.Context) origin {
	return origin{project: projectOf(c), callerIP: c.RealIP(), hops: hopsOf(c)}
}

// message parses one message's headers (workflow ones included) and attaches what comes
// from the request.
func (h *publishHandlers) message(c echo.Context, header http.Header, dest string, body []byte, queue string) (delivery.Publication, error) {
	return h.messageFrom(requestOrigin(c), header, dest, body, queue)
}

// messageFrom is message for a message of origin o.
func (h *publishHandlers) messageFrom(o origin, header http.Header, dest string, body []byte, queue string) (delivery.Publication, error) {
	if header.Get(headerCron) != "" {
		return delivery.Publication{}, headerError(headerCron, "create a schedule with POST /v2/schedules/{destination}; publish takes no cron, nothing was published")
	}
	p := h.parser()
	m, err := p.parse(header, dest)
	if err != nil {
		return delivery.Publication{}, err
	}
	m.Project, m.Body, m.Queue, m.CallerIP, m.Hops = o.project, body, queue, o.callerIP, o.hops
	init, err := p.workflow(header, m)
	if err != nil {
		return delivery.Publication{}, err
	}
	if m.DedupID == "" && strings.EqualFold(strings.TrimSpace(header.Get(wire.HeaderContentBasedDedup)), "true") {
		sum := sha256.New()
		sum.Write([]byte(m.URL))
		sum.Write([]byte{0})
		sum.Write(body)
		m.DedupID = "content:" + hex.EncodeToString(sum.Sum(nil))
	}
	return delivery.Publication{Message: m, Init: init}, nil
}

func toPublishResponse(r delivery.PublishResult) wire.PublishResult {
	return wire.PublishResult{MessageID: r.MessageID, URL: r.URL, Deduplicated: r.Deduplicated}
}

// bodyLimit is the body limit of a message with these headers: a workflow message's
// (Upstash-Workflow-RunId set) is MaxWorkflowBodyBytes.
func (c Config) bodyLimit(h http.Header) int64 {
	if h.Get(wire.HeaderWorkflowRunID) != "" {
		return max(c.MaxWorkflowBodyBytes, c.MaxBodyBytes)
	}
	return c.MaxBodyBytes
}

// readBody reads the request body up to limit bytes; more is a 413.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	r := c.Request()
	if n := r.ContentLength; n > 0 && n <= limit {
		// The size is known: one allocation instead of io.ReadAll's doubling.
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, badRequest("reading request body: %v", err)
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, err
		}
		return nil, badRequest("reading request body: %v", err)
	}
	return body, nil
}

// prefixError puts where in the request an error occurred in front of its message.
func prefixError(where string, err error) error {
	var api *apiError
	if errors.As(err, &api) {
		return &apiError{status: api.status, msg: where + ": " + api.msg}
	}
	return err
}
