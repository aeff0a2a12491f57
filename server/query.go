package server

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
)

// Listing limits.
const (
	defaultCount = 100
	maxCount     = 1000
	maxIDs       = 1000
)

// listQuery is the common part of list and bulk requests: count, cursor, ids, filters.
type listQuery struct {
	count  int
	cursor string
	ids    []string
	f      filters
}

// filters are the message filters shared by messages, logs and the DLQ.
type filters struct {
	url, urlPrefix, queue, label, state, messageID, callerIP, host, path, flowControlKey string
	topicName, scheduleID                                                                string
	responseStatus                                                                       int
	fromMs, toMs                                                                         int64
}

// parseCount reads the optional count parameter: def when absent, capped at max.
func parseCount(c echo.Context, def, max int) (int, error) {
	v := c.QueryParam("count")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("count: want a positive integer, got %q", v)
	}
	return min(n, max), nil
}

// parseList reads count, cursor (an id with the given prefix, or a unix-ms timestamp
// meaning "before this time", as the SDK documents), the repeated idParam, and filters.
func parseList(c echo.Context, idParam, cursorPrefix string, idAt func(time.Time) string) (listQuery, error) {
	q := c.QueryParams()
	lq := listQuery{}
	var err error
	if lq.count, err = parseCount(c, defaultCount, maxCount); err != nil {
		return lq, err
	}
	if v := q.Get("cursor"); v != "" {
		switch {
		case strings.HasPrefix(v, cursorPrefix) && len(v) == len(cursorPrefix)+24 && isHex(v[len(cursorPrefix):]):
			lq.cursor = v
		case isDigits(v):
			ms, _ := strconv.ParseInt(v, 10, 64)
			lq.cursor = idAt(time.UnixMilli(ms))
		default:
			return lq, badRequest("cursor: %q is not a cursor returned by this API", v)
		}
	}
	lq.ids = q[idParam]
	if len(lq.ids) > maxIDs {
		return lq, badRequest("%s: at most %d ids", idParam, maxIDs)
	}
	if lq.f, err = parseFilters(q); err != nil {
		return lq, err
	}
	return lq, nil
}

func parseFilters(q url.Values) (filters, error) {
	f := filters{
		url: q.Get("url"), urlPrefix: q.Get("urlPrefix"), queue: q.Get("queueName"), label: q.Get("label"),
		state: q.Get("state"), messageID: q.Get("messageId"), callerIP: q.Get("callerIp"),
		host: q.Get("host"), path: q.Get("path"), flowControlKey: q.Get("flowControlKey"),
		topicName: q.Get("topicName"), scheduleID: q.Get("scheduleId"),
	}
	var err error
	if f.fromMs, err = msParam(q, "fromDate"); err != nil {
		return f, err
	}
	if f.toMs, err = msParam(q, "toDate"); err != nil {
		return f, err
	}
	if v := q.Get("responseStatus"); v != "" {
		if f.responseStatus, err = strconv.Atoi(v); err != nil {
			return f, badRequest("responseStatus: want an integer, got %q", v)
		}
	}
	return f, nil
}

func msParam(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("%s: want unix milliseconds, got %q", name, v)
	}
	return n, nil
}

// matchMessage applies the filters that concern a message's identity and destination.
func (f filters) matchMessage(id, rawURL, queue string, labels []string, callerIP string, createdMs int64, fcKey, scheduleID, topicName string) bool {
	if f.topicName != "" && f.topicName != topicName {
		return false
	}
	if f.scheduleID != "" && f.scheduleID != scheduleID {
		return false
	}
	if f.messageID != "" && f.messageID != id {
		return false
	}
	if f.url != "" && f.url != rawURL {
		return false
	}
	if f.urlPrefix != "" && !strings.HasPrefix(rawURL, f.urlPrefix) {
		return false
	}
	if f.queue != "" && f.queue != queue {
		return false
	}
	if f.label != "" && !contains(labels, f.label) {
		return false
	}
	if f.callerIP != "" && f.callerIP != callerIP {
		return false
	}
	if f.flowControlKey != "" && f.flowControlKey != fcKey {
		return false
	}
	if f.fromMs != 0 && createdMs < f.fromMs {
		return false
	}
	if f.toMs != 0 && createdMs > f.toMs {
		return false
	}
	if f.host != "" || f.path != "" {
		u, err := url.Parse(rawURL)
		if err != nil || (f.host != "" && u.Host != f.host) || (f.path != "" && u.Path != f.path) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// idAt makes the cursor function for ids with prefix.
func idAt(prefix string) func(time.Time) string {
	return func(t time.Time) string { return delivery.IDAt(prefix, t) }
}
