package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
)

// The Runs page has two tabs. Native runs (started by events, crons or the native API)
// are searched as GET /runs searches them: the native service's search over the runs
// index, with the same filters, the same bounds and the same cursor. All runs, native or
// started through the Upstash API (/v2), are listed newest first, filtered by engine
// state (RUN_*, the Overview's counts) and label.

const (
	kindNative = "native"
	kindAll    = "all"
	// maxSearchQ bounds the q text the console passes on; the expression's own, smaller
	// limit answers with its message.
	maxSearchQ = 4096
)

var nativeStatuses = []string{native.StatusQueued, native.StatusRunning, native.StatusSleeping, native.StatusWaiting,
	native.StatusSucceeded, native.StatusFailed, native.StatusCancelled}

// searchForm is the native search as the visitor wrote it.
type searchForm struct {
	Workflow, App, Status, Label, EventName, From, To, Q string
}

// searchFields are the form's fields, in the order a description lists them.
var searchFields = []string{"workflow", "app", "status", "label", "eventName", "from", "to", "q"}

func (f *searchForm) field(name string) *string {
	switch name {
	case "workflow":
		return &f.Workflow
	case "app":
		return &f.App
	case "status":
		return &f.Status
	case "label":
		return &f.Label
	case "eventName":
		return &f.EventName
	case "from":
		return &f.From
	case "to":
		return &f.To
	}
	return &f.Q
}

// readSearch reads the search fields (from a query or a posted form), refusing one
// that is too long to be a filter.
func readSearch(get func(string) string) (searchForm, error) {
	var f searchForm
	for _, name := range searchFields {
		v := strings.TrimSpace(get(name))
		limit := maxQuery
		if name == "q" {
			limit = maxSearchQ
		}
		if len(v) > limit {
			return f, errors.New(name + ": longer than " + strconv.Itoa(limit) + " bytes")
		}
		*f.field(name) = v
	}
	return f, nil
}

// localLayouts are what a datetime-local input sends: a time without a zone, which the
// console (showing UTC) reads as UTC.
var localLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999"}

// apiTime turns a datetime-local value into the RFC 3339 time the API takes; anything
// else (unix ms, RFC 3339, a mistake) goes to the API's parser as written.
func apiTime(v string) string {
	for _, layout := range localLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	}
	return v
}

// inputTime shows a from/to value in a datetime-local input ("" when it is not a time).
func inputTime(v string) string {
	if v == "" {
		return ""
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t, err := time.Parse(time.RFC3339Nano, apiTime(v))
		if err != nil {
			return ""
		}
		ms = t.UnixMilli()
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05")
}

// FromInput and ToInput are the bounds as the form's datetime-local inputs show them.
func (f searchForm) FromInput() string { return inputTime(f.From) }
func (f searchForm) ToInput() string   { return inputTime(f.To) }

// filter validates the search with the API's rules (native.RunSearch).
func (f searchForm) filter() (native.RunFilter, error) {
	return native.SearchOfQuery(func(name string) string {
		v := *f.field(name)
		if name == "from" || name == "to" {
			v = apiTime(v)
		}
		return v
	}).Filter()
}

// values is the search as query parameters (empty fields left out).
func (f searchForm) values() url.Values {
	q := url.Values{"kind": {kindNative}}
	for _, name := range searchFields {
		if v := *f.field(name); v != "" {
			q.Set(name, v)
		}
	}
	return q
}

// Describe says the search in words ("" when it has no filter).
func (f searchForm) Describe() string {
	var parts []string
	for _, name := range searchFields {
		v := *f.field(name)
		if v == "" {
			continue
		}
		switch name {
		case "from":
			parts = append(parts, "created at or after "+shownTime(v))
		case "to":
			parts = append(parts, "created at or before "+shownTime(v))
		default:
			parts = append(parts, name+" = "+v)
		}
	}
	return strings.Join(parts, ", ")
}

func shownTime(v string) string {
	if t := inputTime(v); t != "" {
		return strings.Replace(t, "T", " ", 1) + " UTC"
	}
	return v
}

type runsData struct {
	Kind   string
	Native bool // native workflows are enabled: the Native runs tab
	// The All runs tab.
	Status, Label string
	States        []string
	Runs          []runRow
	// The Native tab.
	Search   searchForm
	Statuses []string
	Found    []native.RunView
	Next     string // URL of the next page ("" at the end)
	Failed   bool   // the search was refused: no results, no live refresh
}

// runsKind is the tab a request shows: the one it names; else all runs for an engine
// state (RUN_*: the Overview's links), the native runs when the project has native
// workflows, and all runs otherwise.
func (c *Console) runsKind(r *http.Request) (string, error) {
	switch kind := r.URL.Query().Get("kind"); {
	case c.cfg.Native == nil:
		return kindAll, nil
	case kind == kindNative || kind == kindAll:
		return kind, nil
	case kind != "":
		return "", errors.New("kind: want native or all, got " + quoteShort(kind))
	case slices.Contains(runStates, r.URL.Query().Get("status")):
		return kindAll, nil
	}
	defs, err := c.cfg.Native.Workflows(r.Context(), sessionOf(r).project, "")
	if err != nil || len(defs) > 0 {
		return kindNative, err
	}
	return kindAll, nil
}

func (c *Console) runs(w http.ResponseWriter, r *http.Request) {
	kind, err := c.runsKind(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if kind == kindNative {
		c.nativeRuns(w, r)
		return
	}
	c.allRuns(w, r)
}

// nativeRuns searches native runs; a refused search shows the form with the reason.
func (c *Console) nativeRuns(w http.ResponseWriter, r *http.Request) {
	d := runsData{Kind: kindNative, Native: true, Statuses: nativeStatuses}
	page := func(status int, msg string) {
		d.Failed = msg != ""
		c.render(w, r, status, "runs", pageData{Title: "Runs", Nav: "runs", Error: msg, Data: d})
	}
	var err error
	if d.Search, err = readSearch(r.URL.Query().Get); err != nil {
		page(http.StatusBadRequest, err.Error())
		return
	}
	f, err := d.Search.filter()
	var after *delivery.RunCursor
	if err == nil {
		after, err = native.ParseCursor(r.URL.Query().Get("cursor"))
	}
	var next *delivery.RunCursor
	if err == nil {
		d.Found, next, err = c.cfg.Native.Runs(r.Context(), sessionOf(r).project, f, after, listRuns)
	}
	if err != nil {
		status, msg := classify(err)
		if status == http.StatusInternalServerError {
			c.log.Error("console_read_failed", "path", r.URL.Path, "err", err)
		}
		page(status, msg)
		return
	}
	if next != nil {
		q := d.Search.values()
		q.Set("cursor", native.FormatCursor(next))
		d.Next = "/console/runs?" + q.Encode()
	}
	page(http.StatusOK, "")
}

// allRuns lists every run, newest first.
func (c *Console) allRuns(w http.ResponseWriter, r *http.Request) {
	project := sessionOf(r).project
	status, err := query(r, "status")
	if err == nil && status != "" && !slices.Contains(runStates, status) {
		err = errors.New("status: want one of " + strings.Join(runStates, ", "))
	}
	label, lerr := query(r, "label")
	if err = errors.Join(err, lerr); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	keep := func(run *delivery.Run) bool {
		return (status == "" || run.State == status) && (label == "" || slices.Contains(run.Labels, label))
	}
	runs, _, err := c.engine.Runs(r.Context(), project, nil, listRuns, keep)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := runsData{Kind: kindAll, Native: c.cfg.Native != nil, Status: status, Label: label, States: runStates}
	for i := range runs {
		row := runRow{RunWithHistory: runs[i]}
		if runs[i].Live() {
			reason, since, ok, err := c.engine.RunWaitReason(r.Context(), project, runs[i].ID)
			if err != nil {
				c.failErr(w, r, err)
				return
			}
			if ok {
				row.Wait, row.WaitSince = reason, since
			}
		}
		d.Runs = append(d.Runs, row)
	}
	c.render(w, r, http.StatusOK, "runs", pageData{Title: "Runs", Nav: "runs", Data: d})
}
