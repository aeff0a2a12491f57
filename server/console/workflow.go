package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
)

type workflowData struct {
	Row   workflowRow
	Chart wfChart
	Event string // the event name the form suggests (the first trigger)
}

// workflow shows one native workflow: its definition, its last hour as a chart, and a
// form to send it a test event.
func (c *Console) workflow(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Native == nil {
		c.fail(w, r, http.StatusNotFound, "native workflows are not enabled on this server")
		return
	}
	project, name := sessionOf(r).project, r.PathValue("name")
	def, err := c.cfg.Native.Workflow(r.Context(), project, name)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.cfg.Now()
	since := now.Add(-chartMinutes * 60e9).UnixMilli()
	runs, _, err := c.engine.Runs(r.Context(), project, nil, statRuns, func(run *delivery.Run) bool {
		return run.CreatedAt >= since && workflowOf(run) == name
	})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := workflowData{Row: workflowRow{Name: def.Name, App: def.App, URL: def.URL, Retries: def.Retries,
		Controls: controlsInWords(def.FlowControl), RunsLastHour: len(runs)}, Chart: c.workflowChart(runs, now)}
	for _, t := range def.Triggers {
		if t.Event != "" {
			d.Row.Triggers = append(d.Row.Triggers, t.Event)
		}
	}
	if len(d.Row.Triggers) > 0 {
		d.Event = d.Row.Triggers[0]
	}
	c.render(w, r, http.StatusOK, "workflow", pageData{Title: "Workflow " + name, Nav: "workflows", Data: d})
}

// sendEvent sends one event from the console's form (name, data as JSON; the form is
// capped at maxFormBytes) as POST /events does, then shows the event with what each workflow did with it.
func (c *Console) sendEvent(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Native == nil {
		c.fail(w, r, http.StatusNotFound, "native workflows are not enabled on this server")
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("name"))
	data := strings.TrimSpace(r.PostForm.Get("data"))
	if data == "" {
		data = "{}"
	}
	switch {
	case name == "":
		c.fail(w, r, http.StatusBadRequest, "name: the event needs a name")
		return
	case !json.Valid([]byte(data)):
		c.fail(w, r, http.StatusBadRequest, "data: not valid JSON")
		return
	}
	body, err := json.Marshal(map[string]any{"name": name, "data": json.RawMessage(data)})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	events, err := c.cfg.Native.ParseEvents(body)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, strings.TrimPrefix(err.Error(), native.ErrInvalid.Error()+": "))
		return
	}
	res, err := c.cfg.Native.SendEvents(r.Context(), sessionOf(r).project, events)
	if errors.Is(err, native.ErrBusy) {
		c.fail(w, r, http.StatusTooManyRequests, err.Error())
		return
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if len(res) == 1 && len(res[0].Runs) == 1 && res[0].Runs[0].RunID != "" {
		http.Redirect(w, r, "/console/runs/"+urlPath(res[0].Runs[0].RunID), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/console/events?name="+url.QueryEscape(name), http.StatusSeeOther)
}
