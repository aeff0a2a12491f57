package console

import (
	"net/http"
	"strconv"

	"github.com/duraton/duraton/delivery/native"
)

// Bulk cancel and replay of the native runs a search selects, in two steps: "count" is
// the action's dry run and asks to confirm with the count; only "act" acts. Both take the
// search's filters, validated as the API validates them, and go through the native
// service's bulk operations (POST /runs/cancel, /runs/replay): one step handles at most
// Config.BulkLimit matching runs, in small transactions, and when more may match
// it offers to count the next ones from where it stopped. A search without any filter
// acts on every run of the project, which the confirm says and the act step requires
// ("all", as the API's "all": true). The count fixes "asof": runs created after it are
// left alone by the confirm.

const (
	bulkCount = "count"
	bulkAct   = "act"
)

// bulkData is the confirm step, or the result, of a bulk action.
type bulkData struct {
	Op     string // cancel or replay
	Search searchForm
	All    bool   // no filter: the action takes every run of the project
	Cursor string // where the counted runs start ("": the newest)
	AsOf   int64  // unix ms: runs created later are left alone
	Count  int    // runs matched (a dry run's count, or the runs the act step found)
	More   bool   // the step stopped at its limit: more runs may match after these
	Acted  bool   // the act step's result
	Done   int    // runs cancelled or replayed
	Next   string // cursor to count the next runs from
	Back   string // the search's URL
}

// Verb is the action in words, capitalised.
func (d bulkData) Verb() string {
	if d.Op == "replay" {
		return "Replay"
	}
	return "Cancel"
}

// Eligible says which runs the action takes.
func (d bulkData) Eligible() string {
	if d.Op == "replay" {
		return "Only failed runs whose dead letter is still in the DLQ are replayed, from their failed step."
	}
	return "Only live runs (queued, running, sleeping or waiting) are cancelled."
}

// bulkForm is what a bulk step's form carries on: the action, the search, the count's
// time, the step it asks for and where that step starts.
type bulkForm struct {
	CSRF         string
	D            bulkData
	Step, Cursor string
}

type hiddenField struct{ Name, Value string }

// Hidden is the search as the hidden fields of a form.
func (f searchForm) Hidden() []hiddenField {
	var out []hiddenField
	for _, name := range searchFields {
		if v := *f.field(name); v != "" {
			out = append(out, hiddenField{name, v})
		}
	}
	return out
}

// bulkRuns answers the count and the act step of a bulk cancel or replay.
func (c *Console) bulkRuns(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Native == nil {
		c.fail(w, r, http.StatusNotFound, "native workflows are not enabled on this server")
		return
	}
	form := r.PostForm
	d := bulkData{Op: form.Get("op"), Cursor: form.Get("cursor")}
	step := form.Get("step")
	switch {
	case d.Op != "cancel" && d.Op != "replay":
		c.fail(w, r, http.StatusBadRequest, "op: want cancel or replay, got "+quoteShort(d.Op))
		return
	case step != bulkCount && step != bulkAct:
		c.fail(w, r, http.StatusBadRequest, "step: want count or act, got "+quoteShort(step))
		return
	}
	var err error
	if d.Search, err = readSearch(form.Get); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d.Back = "/console/runs?" + d.Search.values().Encode()
	f, err := d.Search.filter()
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	after, err := native.ParseCursor(d.Cursor)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.AsOf = c.cfg.Now().UnixMilli()
	if v := form.Get("asof"); v != "" {
		if d.AsOf, err = strconv.ParseInt(v, 10, 64); err != nil || d.AsOf < 0 {
			c.fail(w, r, http.StatusBadRequest, "asof: want unix milliseconds, got "+quoteShort(v))
			return
		}
	}
	d.All = f.Empty()
	if d.All && step == bulkAct && form.Get("all") != "1" {
		c.fail(w, r, http.StatusBadRequest, "all: without any filter this acts on every run of the project; confirm that on the count step")
		return
	}
	if f.To == 0 || f.To > d.AsOf {
		f.To = d.AsOf
	}
	req := native.BulkRequest{Filter: f, After: after, Limit: c.cfg.BulkLimit, DryRun: step == bulkCount}
	do := c.cfg.Native.CancelRuns
	if d.Op == "replay" {
		do = c.cfg.Native.ReplayRuns
	}
	res, err := do(r.Context(), sessionOf(r).project, req)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Count, d.Done, d.Acted = res.Matched, res.Done, step == bulkAct
	d.More, d.Next = res.Cursor != nil, native.FormatCursor(res.Cursor)
	if d.Acted {
		c.log.Info("console_bulk_action", "op", d.Op, "project", sessionOf(r).project, "matched", d.Count, "done", d.Done)
	}
	c.render(w, r, http.StatusOK, "runsbulk", pageData{Title: d.Verb() + " runs", Nav: "runs", Data: d})
}
