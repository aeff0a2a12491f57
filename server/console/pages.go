package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
)

// Page sizes and scan bounds: every page reads a bounded amount.
const (
	statRuns    = 10_000 // runs counted by state on the overview
	listRuns    = 50     // runs per page
	listKeys    = 200    // flow-control keys shown
	listEntries = 50     // log events or dead letters per page
	maxQuery    = 512    // length of a filter value
)

func classify(err error) (int, string) {
	switch {
	case errors.Is(err, delivery.ErrNotFound), errors.Is(err, delivery.ErrRunNotFound):
		return http.StatusNotFound, "not found in this project"
	case errors.Is(err, delivery.ErrRunEnded), errors.Is(err, native.ErrConflict), errors.Is(err, native.ErrRunEnded):
		return http.StatusConflict, err.Error()
	case errors.Is(err, delivery.ErrFlowKeyLimit), errors.Is(err, delivery.ErrRunLimit), errors.Is(err, delivery.ErrQueueLimit):
		return http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, flowctl.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, native.ErrInvalid):
		return http.StatusBadRequest, strings.TrimPrefix(err.Error(), native.ErrInvalid.Error()+": ")
	case errors.Is(err, delivery.ErrStoreUnavailable):
		return http.StatusServiceUnavailable, "the store is unavailable; try again"
	}
	return http.StatusInternalServerError, "internal error (logged)"
}

// query reads a filter value, refusing one that is too long.
func query(r *http.Request, name string) (string, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if len(v) > maxQuery {
		return "", errors.New(name + ": longer than 512 bytes")
	}
	return v, nil
}

type overviewData struct {
	Native      bool                   // native workflows are enabled: Stats and the backlogs below
	Stats       native.RunStats        // live native runs: active, queued, running
	Debounce    []native.DebounceState // debounce backlogs
	Batch       []native.BatchState    // batch backlogs
	States      []stateCount
	TotalRuns   int
	MoreRuns    bool
	Limit       int
	InFlight    int
	Chart       chart
	WaitingKeys int
	Waiting     int
}

type stateCount struct {
	State string
	Count int
}

var runStates = []string{delivery.RunStarted, delivery.RunSuccess, delivery.RunFailed, delivery.RunCanceled}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	project := sessionOf(r).project
	counts, more, err := c.engine.RunStates(r.Context(), project, statRuns)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := overviewData{MoreRuns: more}
	for _, st := range runStates {
		d.States = append(d.States, stateCount{st, counts[st]})
		d.TotalRuns += counts[st]
	}
	d.Limit, d.InFlight = c.engine.GlobalParallelism(project)
	for _, k := range c.engine.FlowKeys(project, "") {
		if k.WaitListSize > 0 {
			d.WaitingKeys++
			d.Waiting += k.WaitListSize
		}
	}
	if d.Chart, err = c.hourChart(r, project); err != nil {
		c.failErr(w, r, err)
		return
	}
	if c.cfg.Native != nil {
		d.Native = true
		st, err := c.cfg.Native.Stats(r.Context(), project)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		fs, err := c.cfg.Native.FlowState(r.Context(), project, "", "")
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.Stats, d.Debounce, d.Batch = *st, fs.Debounce, fs.Batch
	}
	c.render(w, r, http.StatusOK, "overview", pageData{Title: "Overview", Nav: "overview", Data: d})
}

type runRow struct {
	delivery.RunWithHistory
	Wait      string
	WaitSince time.Time
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) {
	project := sessionOf(r).project
	run, err := c.engine.Run(r.Context(), project, r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d, err := c.timeline(r, project, run)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Waterfall = buildWaterfall(&d, c.cfg.Now())
	if c.cfg.Live != nil {
		d.Stream = "/console/runs/" + urlPath(run.ID) + "/events"
	}
	c.render(w, r, http.StatusOK, "run", pageData{Title: "Run " + run.ID, Nav: "runs", Data: d})
}

// replayRun re-runs a failed run from its failed step, its history kept: a native run
// through the native API's replay, an Upstash run by resuming its dead letter.
func (c *Console) replayRun(w http.ResponseWriter, r *http.Request) {
	project, id := sessionOf(r).project, r.PathValue("id")
	run, err := c.engine.Run(r.Context(), project, id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if run.State != delivery.RunFailed || run.DLQID == "" {
		c.fail(w, r, http.StatusConflict, "only a failed run whose dead letter is still in the DLQ can be replayed; this run is "+run.State)
		return
	}
	if c.cfg.Native != nil && workflowOf(&run.Run) != "" {
		_, err = c.cfg.Native.ReplayRun(r.Context(), project, id)
	} else {
		var resumed []delivery.ResumedRun
		if resumed, err = c.engine.ResumeRuns(r.Context(), project, []string{run.DLQID}, false, nil); err == nil && len(resumed) == 0 {
			err = delivery.ErrNotFound // the dead letter went meanwhile
		}
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/runs/"+urlPath(id), http.StatusSeeOther)
}

func (c *Console) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := c.engine.CancelRun(r.Context(), sessionOf(r).project, id); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/runs/"+urlPath(id), http.StatusSeeOther)
}

type keysData struct {
	Search string
	Keys   []delivery.FlowInfo
	More   bool
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request) {
	search, err := query(r, "q")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	keys := c.engine.FlowKeys(sessionOf(r).project, search)
	slices.SortFunc(keys, func(a, b delivery.FlowInfo) int { return strings.Compare(a.Key, b.Key) })
	d := keysData{Search: search, Keys: keys}
	if len(keys) > listKeys {
		d.Keys, d.More = keys[:listKeys], true
	}
	c.render(w, r, http.StatusOK, "keys", pageData{Title: "Flow-control keys", Nav: "keys", Data: d})
}

func (c *Console) keyAction(w http.ResponseWriter, r *http.Request) {
	project, key := sessionOf(r).project, r.PostForm.Get("key")
	var err error
	switch op := r.PostForm.Get("op"); op {
	case "pause", "resume":
		err = c.engine.SetFlowKeyPaused(r.Context(), project, key, op == "pause")
	case "reset":
		err = c.engine.ResetFlowKeyRate(r.Context(), project, key)
	default:
		c.fail(w, r, http.StatusBadRequest, "op: want pause, resume or reset, got "+quoteShort(op))
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/keys?q="+urlQuery(r.PostForm.Get("q")), http.StatusSeeOther)
}

type dlqData struct {
	Entries []delivery.DLQEntry
	Next    string
}

func (c *Console) dlq(w http.ResponseWriter, r *http.Request) {
	cursor, err := query(r, "cursor")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	entries, next, err := c.engine.DLQ(r.Context(), sessionOf(r).project, cursor, listEntries, func(*delivery.DLQEntry) bool { return true })
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "dlq", pageData{Title: "Dead letters", Nav: "dlq", Data: dlqData{Entries: entries, Next: next}})
}

func (c *Console) dlqEntry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	entries, _, err := c.engine.DLQ(r.Context(), sessionOf(r).project, "", 1, func(d *delivery.DLQEntry) bool { return d.DLQID == id })
	if err == nil && len(entries) == 0 {
		err = delivery.ErrNotFound
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "dlqentry", pageData{Title: "Dead letter " + id, Nav: "dlq", Data: entries[0]})
}

func (c *Console) dlqAction(w http.ResponseWriter, r *http.Request) {
	project, id := sessionOf(r).project, r.PostForm.Get("id")
	if id == "" || len(id) > maxQuery {
		c.fail(w, r, http.StatusBadRequest, "id: name one dead letter")
		return
	}
	var err error
	switch op := r.PostForm.Get("op"); op {
	case "retry":
		err = c.retryDLQ(r, project, id)
	case "delete":
		var n int
		if n, err = c.engine.DeleteDLQ(r.Context(), project, []string{id}); err == nil && n == 0 {
			err = delivery.ErrNotFound
		}
	default:
		c.fail(w, r, http.StatusBadRequest, "op: want retry or delete, got "+quoteShort(op))
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/dlq", http.StatusSeeOther)
}

// dlqBulk retries or deletes the selected dead letters (at most a page of them). Every
// selected id must be one of the project's dead letters, else nothing changes.
func (c *Console) dlqBulk(w http.ResponseWriter, r *http.Request) {
	project, ids := sessionOf(r).project, r.PostForm["id"]
	if len(ids) == 0 || len(ids) > listEntries {
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("id: select 1 to %d dead letters, got %d", listEntries, len(ids)))
		return
	}
	op := r.PostForm.Get("op")
	if op != "retry-selected" && op != "delete-selected" {
		c.fail(w, r, http.StatusBadRequest, "op: want retry-selected or delete-selected, got "+quoteShort(op))
		return
	}
	selected := map[string]bool{}
	for _, id := range ids {
		if id == "" || len(id) > maxQuery {
			c.fail(w, r, http.StatusBadRequest, "id: a selected dead letter id is empty or too long")
			return
		}
		selected[id] = true
	}
	entries, _, err := c.engine.DLQ(r.Context(), project, "", len(selected), func(d *delivery.DLQEntry) bool { return selected[d.DLQID] })
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if len(entries) != len(selected) {
		c.failErr(w, r, delivery.ErrNotFound) // another project's, or gone meanwhile
		return
	}
	if op == "delete-selected" {
		_, err = c.engine.DeleteDLQ(r.Context(), project, slices.Collect(maps.Keys(selected)))
	} else {
		var runs, plain []string
		for _, d := range entries {
			if d.Message.RunID != "" {
				runs = append(runs, d.DLQID)
			} else {
				plain = append(plain, d.DLQID)
			}
		}
		if len(runs) > 0 {
			_, err = c.engine.ResumeRuns(r.Context(), project, runs, false, nil)
		}
		if err == nil && len(plain) > 0 {
			_, err = c.engine.RetryDLQ(r.Context(), project, plain)
		}
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/console/dlq", http.StatusSeeOther)
}

// retryDLQ sends a dead letter again: a failed workflow run resumes from its failed
// step; a plain message is published again with a fresh retry budget.
func (c *Console) retryDLQ(r *http.Request, project, id string) error {
	entries, _, err := c.engine.DLQ(r.Context(), project, "", 1, func(d *delivery.DLQEntry) bool { return d.DLQID == id })
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return delivery.ErrNotFound
	}
	if entries[0].Message.RunID != "" {
		_, err = c.engine.ResumeRuns(r.Context(), project, []string{id}, false, nil)
		return err
	}
	_, err = c.engine.RetryDLQ(r.Context(), project, []string{id})
	return err
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return `"` + s + `"`
}

// workflowOf is the native workflow a run belongs to ("" for a run started through the
// Upstash API).
func workflowOf(run *delivery.Run) string {
	if v := run.Header[wire.HeaderDuratonWorkflow]; len(v) > 0 {
		return v[0]
	}
	return ""
}
