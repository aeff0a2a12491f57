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

// filters are the message filters shared by messages, logs and the DLQ. A filter given
// several times (label=a&label=b) admits any of its values, as the official SDK
// documents; different filters must all admit a record.
type filters struct {
	url, urlPrefix, queue, label, state, messageID, callerIP, host, path, flowControlKey multi
	topicName, scheduleID                                                                multi
	responseStatus                                                                       []int
	fromMs, toMs                                                                         int64
}

// multi is a filter's values: empty admits everything, otherwise any value matches.
type multi []string

func (m multi) admits(v string) bool { return len(m) == 0 || contains(m, v) }

func (m multi) admitsAny(vs []string) bool {
	if len(m) == 0 {
		return true
	}
	for _, v := range vs {
		if contains(m, v) {
			return true
		}
	}
	return false
}

func (m multi) admitsPrefixOf(v string) bool {
	if len(m) == 0 {
		return true
	}
	for _, p := range m {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// admitsStatus applies the responseStatus filter.
func (f filters) admitsStatus(status int) bool {
	if len(f.responseStatus) == 0 {
		return true
	}
	for _, s := range f.responseStatus {
		if s == status {
			return true
		}
	}
	return false
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
		url: values(q, "url"), urlPrefix: values(q, "urlPrefix"), queue: values(q, "queueName"), label: values(q, "label"),
		state: values(q, "state"), messageID: values(q, "messageId"), callerIP: values(q, "callerIp"),
		host: values(q, "host"), path: values(q, "path"), flowControlKey: values(q, "flowControlKey"),
		topicName: values(q, "topicName"), scheduleID: values(q, "scheduleId"),
	}
	var err error
	if f.fromMs, err = msParam(q, "fromDate"); err != nil {
		return f, err
	}
	if f.toMs, err = msParam(q, "toDate"); err != nil {
		return f, err
	}
	for _, v := range values(q, "responseStatus") {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, badRequest("responseStatus: want an integer, got %q", v)
		}
		f.responseStatus = append(f.responseStatus, n)
	}
	return f, nil
}

// values returns the non-empty values of a query parameter.
func values(q url.Values, name string) multi {
	var out multi
	for _, v := range q[name] {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
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
	if !f.topicName.admits(topicName) || !f.scheduleID.admits(scheduleID) {
		return false
	}
	if !f.messageID.admits(id) || !f.url.admits(rawURL) || !f.urlPrefix.admitsPrefixOf(rawURL) ||
		!f.queue.admits(queue) || !f.label.admitsAny(labels) || !f.callerIP.admits(callerIP) ||
		!f.flowControlKey.admits(fcKey) {
		return false
	}
	if f.fromMs != 0 && createdMs < f.fromMs {
		return false
	}
	if f.toMs != 0 && createdMs > f.toMs {
		return false
	}
	if len(f.host) > 0 || len(f.path) > 0 {
		u, err := url.Parse(rawURL)
		if err != nil || !f.host.admits(u.Host) || !f.path.admits(u.Path) {
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
