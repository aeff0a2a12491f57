package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/flowctl"
)

// NativeReads is what the console reads of native workflows and does to them: the
// Workflows, Events and Runs pages, the send-event form and the bulk run actions
// (delivery/native.Service implements it).
type NativeReads interface {
	Workflows(ctx context.Context, project, app string) ([]native.Workflow, error)
	Events(ctx context.Context, project, name, cursor string, limit int) ([]native.Event, string, error)
	Stats(ctx context.Context, project string) (*native.RunStats, error)
	FlowState(ctx context.Context, project, app, workflow string) (*native.FlowState, error)
	ReplayRun(ctx context.Context, project, id string) (*native.RunView, error)
	Workflow(ctx context.Context, project, name string) (*native.Workflow, error)
	ParseEvents(body []byte) ([]native.EventIn, error)
	SendEvents(ctx context.Context, project string, events []native.EventIn) ([]native.EventResult, error)
	Runs(ctx context.Context, project string, f native.RunFilter, after *delivery.RunCursor, limit int) ([]native.RunView, *delivery.RunCursor, error)
	CancelRuns(ctx context.Context, project string, req native.BulkRequest) (*native.BulkResult, error)
	ReplayRuns(ctx context.Context, project string, req native.BulkRequest) (*native.BulkResult, error)
}

var _ NativeReads = (*native.Service)(nil)

// listWorkflows caps the workflows a page shows.
const listWorkflows = 500

type workflowsData struct {
	Enabled    bool
	Workflows  []workflowRow
	More       bool
	RunsCapped bool // the last hour's runs were counted over the newest statRuns runs only
}

type workflowRow struct {
	Name, App, URL string
	Triggers       []string
	Controls       []string // each control in words
	Retries        int
	Backlog        string // debounce/batch events held, in words ("" none)
	RunsLastHour   int
}

func (c *Console) workflows(w http.ResponseWriter, r *http.Request) {
	d := workflowsData{Enabled: c.cfg.Native != nil}
	if d.Enabled {
		defs, err := c.cfg.Native.Workflows(r.Context(), sessionOf(r).project, "")
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		if len(defs) > listWorkflows {
			defs, d.More = defs[:listWorkflows], true
		}
		project := sessionOf(r).project
		fs, err := c.cfg.Native.FlowState(r.Context(), project, "", "")
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		backlog := map[string]string{}
		for _, b := range fs.Debounce {
			backlog[b.Workflow] = fmt.Sprintf("%d debounced key(s), next fires %s", b.Pending, b.NextFireAt)
		}
		for _, b := range fs.Batch {
			backlog[b.Workflow] = fmt.Sprintf("%d batched event(s), oldest %s", b.Buffered, b.OldestAt)
		}
		since := c.cfg.Now().Add(-time.Hour).UnixMilli()
		hour := map[string]int{}
		runs, _, err := c.engine.Runs(r.Context(), project, nil, statRuns, func(run *delivery.Run) bool {
			return run.CreatedAt >= since && workflowOf(run) != ""
		})
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.RunsCapped = len(runs) == statRuns
		for i := range runs {
			hour[workflowOf(&runs[i].Run)]++
		}
		for _, def := range defs {
			row := workflowRow{Name: def.Name, App: def.App, URL: def.URL, Retries: def.Retries, Controls: controlsInWords(def.FlowControl),
				Backlog: backlog[def.Name], RunsLastHour: hour[def.Name]}
			for _, t := range def.Triggers {
				if t.Cron != "" {
					row.Triggers = append(row.Triggers, "cron "+t.Cron+" "+cmp.Or(t.TZ, "UTC"))
					continue
				}
				row.Triggers = append(row.Triggers, t.Event)
			}
			row.Controls = append(row.Controls, cancelOnInWords(def.CancelOn)...)
			d.Workflows = append(d.Workflows, row)
		}
	}
	c.render(w, r, http.StatusOK, "workflows", pageData{Title: "Workflows", Nav: "workflows", Data: d})
}

// controlsInWords says what a workflow's controls do, one phrase per control.
func controlsInWords(fc flowctl.Controls) []string {
	var out []string
	per := func(ms int64) string { return fmtMs(ms) }
	key := func(k string) string {
		if k == "" {
			return ""
		}
		return " per " + k
	}
	for _, cc := range fc.Concurrency {
		shared := ""
		if cc.Scope == flowctl.ScopeApp {
			shared = ", shared by the app"
		}
		out = append(out, fmt.Sprintf("at most %d running%s%s", cc.Limit, key(cc.Key), shared))
	}
	if t := fc.Throttle; t != nil {
		burst := ""
		if t.Burst > 0 && t.Burst < t.Limit {
			burst = fmt.Sprintf(", %d at once", t.Burst)
		}
		out = append(out, fmt.Sprintf("throttle: %d starts per %s%s%s", t.Limit, per(t.PerMs), key(t.Key), burst))
	}
	if t := fc.RateLimit; t != nil {
		out = append(out, fmt.Sprintf("rate limit: %d events per %s%s, the rest dropped", t.Limit, per(t.PerMs), key(t.Key)))
	}
	if d := fc.Debounce; d != nil {
		out = append(out, fmt.Sprintf("debounce: starts %s after the last event%s", per(d.PeriodMs), key(d.Key)))
	}
	if b := fc.Batch; b != nil {
		out = append(out, fmt.Sprintf("batch: up to %d events or %s%s", b.MaxSize, per(b.TimeoutMs), key(b.Key)))
	}
	if p := fc.Priority; p != nil {
		switch {
		case p.Run != "":
			out = append(out, "priority: shifted by "+p.Run+" seconds")
		case p.ShiftMs < 0:
			out = append(out, fmt.Sprintf("priority: runs as if enqueued %s later", per(-p.ShiftMs)))
		default:
			out = append(out, fmt.Sprintf("priority: runs as if enqueued %s earlier", per(p.ShiftMs)))
		}
	}
	if s := fc.Singleton; s != nil {
		out = append(out, fmt.Sprintf("singleton (%s)%s", s.Mode, key(s.Key)))
	}
	if i := fc.Idempotency; i != nil {
		out = append(out, fmt.Sprintf("idempotency: one run per %s%s", per(i.PeriodMs), key(i.Key)))
	}
	if cp := fc.Cap; cp != nil {
		var parts []string
		if cp.MaxCost != nil {
			parts = append(parts, fmt.Sprintf("%g USD", *cp.MaxCost))
		}
		if cp.MaxTokens != nil {
			parts = append(parts, fmt.Sprintf("%d tokens", *cp.MaxTokens))
		}
		out = append(out, "AI spend cap per run: "+strings.Join(parts, ", "))
	}
	if tt := fc.TokenThrottle; tt != nil {
		out = append(out, fmt.Sprintf("AI token throttle: %d tokens per %s%s", tt.Tokens, per(tt.PerMs), key(tt.Key)))
	}
	return out
}

// cancelOnInWords says which events cancel a workflow's runs, one phrase per entry.
func cancelOnInWords(entries []native.CancelOn) []string {
	var out []string
	for _, c := range entries {
		phrase := "cancelled by " + c.Event
		if c.Match != "" {
			phrase += " with the same " + c.Match
		}
		if c.If != "" {
			phrase += " if " + c.If
		}
		if c.TimeoutMs > 0 {
			phrase += " within " + fmtMs(c.TimeoutMs) + " of the run's start"
		}
		out = append(out, phrase)
	}
	return out
}

// fmtMs writes a period in the largest whole unit.
func fmtMs(ms int64) string {
	for _, u := range []struct {
		ms   int64
		name string
	}{{86_400_000, "d"}, {3_600_000, "h"}, {60_000, "m"}, {1000, "s"}} {
		if ms >= u.ms && ms%u.ms == 0 {
			return fmt.Sprintf("%d%s", ms/u.ms, u.name)
		}
	}
	return fmt.Sprintf("%dms", ms)
}

type eventsData struct {
	Enabled bool
	Name    string
	Events  []eventRow
	Next    string
}

type eventRow struct {
	ID, Name string
	Ts       int64
	Data     string
	Outcomes []string // what each workflow did
}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	name, err := query(r, "name")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	cursor, err := query(r, "cursor")
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d := eventsData{Enabled: c.cfg.Native != nil, Name: name}
	if d.Enabled {
		evs, next, err := c.cfg.Native.Events(r.Context(), sessionOf(r).project, name, cursor, listEntries)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.Next = next
		for _, ev := range evs {
			row := eventRow{ID: ev.ID, Name: ev.Name, Ts: ev.Ts, Data: showBytes(ev.Data)}
			for _, run := range ev.Runs {
				row.Outcomes = append(row.Outcomes, run.Workflow+": "+outcome(run))
			}
			d.Events = append(d.Events, row)
		}
	}
	c.render(w, r, http.StatusOK, "events", pageData{Title: "Events", Nav: "events", Data: d})
}

// outcome says what one workflow did with an event.
func outcome(r native.EventRun) string {
	var parts []string
	switch {
	case r.Dropped:
		parts = append(parts, "dropped (rate limit)")
	case r.Deduped:
		parts = append(parts, "deduplicated (idempotency)")
	case r.Skipped:
		parts = append(parts, "skipped (singleton)")
	case r.Debounced:
		parts = append(parts, "debounced")
	case r.Batched:
		parts = append(parts, "batched")
	}
	if r.RunID != "" {
		parts = append(parts, "run "+r.RunID)
	}
	if r.HolderRunID != "" {
		parts = append(parts, "held by run "+r.HolderRunID)
	}
	if len(parts) == 0 {
		return "no run"
	}
	return strings.Join(parts, ", ")
}
