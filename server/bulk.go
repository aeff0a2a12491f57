package server

import (
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Destructive routes read their query strictly: a misspelt filter must not be ignored,
// or DELETE /v2/messages?lable=x would cancel everything. Each route lists the
// parameters it understands; anything else is a 400 that changes nothing.

// bulkParams are the query parameters of one destructive route.
type bulkParams struct {
	route   string   // "DELETE /v2/messages", for the error
	ids     string   // the repeated id parameter (messageIds, dlqIds, workflowRunIds), "" if none
	filters []string // filter parameters: any of them selects by filter
	other   []string // parameters that select nothing (count, cursor, ...)
}

// singleValued may be given at most once.
var singleValued = []string{"all", "count", "cursor", "fromDate", "toDate", "workflowRunId", "workflowCreatedAt",
	"workflowUrlExactMatch", "cancel"}

var (
	messageFilters = []string{"url", "urlPrefix", "queueName", "label", "callerIp", "host", "path", "flowControlKey",
		"topicName", "scheduleId", "fromDate", "toDate", "messageId"}
	dlqFilters       = append(slices.Clone(messageFilters), "responseStatus")
	runFilterParams  = []string{"workflowUrl", "workflowRunId", "workflowCreatedAt", "label", "callerIp", "flowControlKey", "host", "path", "fromDate", "toDate", "state"}
	workflowDLQParam = append(slices.Clone(runFilterParams), "url", "responseStatus")

	cancelMessagesParams = bulkParams{route: "DELETE /v2/messages", ids: "messageIds", filters: messageFilters, other: []string{"count", "cursor"}}
	dlqBulkParams        = bulkParams{ids: "dlqIds", filters: dlqFilters, other: []string{"count", "cursor"}}
	workflowDLQParams    = bulkParams{ids: "dlqIds", filters: workflowDLQParam, other: []string{"count", "cursor", "workflowUrlExactMatch"}}
	cancelRunsParams     = bulkParams{route: "DELETE /v2/workflows/runs", ids: "workflowRunIds", filters: runFilterParams, other: []string{"count", "workflowUrlExactMatch"}}
)

func (p bulkParams) on(route string) bulkParams { p.route = route; return p }

// check refuses unknown and repeated single-valued parameters, and a request that
// selects nothing explicitly. Without ids or a filter a bulk request must say `all=true`;
// `count` alone counts as `all`, because that is what the official SDKs (@upstash/qstash
// 2.12, @upstash/workflow 1.3) send for `{ all: true }`.
func (p bulkParams) check(c echo.Context) error {
	q := c.QueryParams()
	var selectsByFilter, hasIDs bool
	for name, vals := range q {
		switch {
		case name == "all":
			if vals[0] != "true" {
				return badRequest("all: want true, got %q", vals[0])
			}
		case name == p.ids && p.ids != "":
			hasIDs = true
		case slices.Contains(p.filters, name):
			selectsByFilter = true
		case slices.Contains(p.other, name):
		default:
			return badRequest("unknown query parameter %q for %s; known: %s", name, p.route, p.known())
		}
		if len(vals) > 1 && slices.Contains(singleValued, name) {
			return badRequest("%s: given %d times; it takes one value", name, len(vals))
		}
	}
	_, all := q["all"]
	_, count := q["count"]
	switch {
	case all && (hasIDs || selectsByFilter):
		return badRequest("all=true cannot be combined with %s or filters", p.ids)
	case !hasIDs && !selectsByFilter && !all && !count:
		return badRequest("%s without %s or a filter would select everything: pass all=true to mean that", p.route, p.ids)
	}
	return nil
}

func (p bulkParams) known() string {
	names := append([]string{"all"}, p.filters...)
	if p.ids != "" {
		names = append(names, p.ids)
	}
	names = append(names, p.other...)
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ", ")
}

// noQuery refuses any query parameter but the allowed ones on a destructive route that
// addresses one record by its path.
func noQuery(c echo.Context, route string, allowed ...string) error {
	for name := range c.QueryParams() {
		if !slices.Contains(allowed, name) {
			return badRequest("unknown query parameter %q for %s", name, route)
		}
	}
	return nil
}
