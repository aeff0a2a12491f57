package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
)

// Log scans read the newest log events page by page and stop at a time bound or after
// maxScan events, so no page reads a whole long history.
const (
	logPage      = 500
	maxScan      = 20_000
	chartMinutes = 60
)

// scanLogs walks a project's log events newest first from cursor ("" = newest), passing
// each to fn until fn returns false, the events are older than since (ms; 0 = no bound),
// or maxScan events were read. next is where a following scan would continue ("" when
// the scan reached the end or the time bound); capped reports the maxScan stop.
func (c *Console) scanLogs(ctx context.Context, project, cursor string, since int64, fn func(*delivery.LogEvent) bool) (next string, capped bool, err error) {
	scanned := 0
	for {
		page, after, err := c.engine.Logs(ctx, project, cursor, logPage, func(*delivery.LogEvent) bool { return true })
		if err != nil {
			return "", false, err
		}
		for i := range page {
			if since > 0 && page[i].Time < since {
				return "", false, nil
			}
			scanned++
			if !fn(&page[i]) {
				return page[i].ID, false, nil
			}
		}
		if after == "" {
			return "", false, nil
		}
		cursor = after
		if scanned >= maxScan {
			return cursor, true, nil
		}
	}
}

// chart is the last hour's deliveries and failed attempts per minute, drawn as SVG bars.
type chart struct {
	Bars              []bar
	Delivered, Failed int
	Max               int
	Capped            bool
	Width, Height     int
}

type bar struct {
	X, W           int
	OkY, OkH       int
	FailY, FailH   int
	Label          string
	Delivered, Bad int
}

func (c *Console) hourChart(r *http.Request, project string) (chart, error) {
	now := c.cfg.Now()
	start := now.Add(-chartMinutes * time.Minute).Truncate(time.Minute).Add(time.Minute)
	var ok, bad [chartMinutes]int
	_, capped, err := c.scanLogs(r.Context(), project, "", start.UnixMilli(), func(ev *delivery.LogEvent) bool {
		i := int(time.UnixMilli(ev.Time).Sub(start) / time.Minute)
		if i < 0 || i >= chartMinutes {
			return true
		}
		switch ev.State {
		case delivery.StateDelivered:
			ok[i]++
		case delivery.StateError, delivery.StateFailed:
			bad[i]++
		}
		return true
	})
	if err != nil {
		return chart{}, err
	}
	ch := chart{Capped: capped, Width: 600, Height: 120, Max: 1}
	for i := range chartMinutes {
		ch.Delivered += ok[i]
		ch.Failed += bad[i]
		ch.Max = max(ch.Max, ok[i]+bad[i])
	}
	const w = 10
	for i := range chartMinutes {
		okH := ok[i] * ch.Height / ch.Max
		badH := bad[i] * ch.Height / ch.Max
		if ok[i] > 0 && okH == 0 {
			okH = 1
		}
		if bad[i] > 0 && badH == 0 {
			badH = 1
		}
		at := start.Add(time.Duration(i) * time.Minute).UTC().Format("15:04")
		ch.Bars = append(ch.Bars, bar{
			X: i * w, W: w - 2, OkY: ch.Height - okH, OkH: okH, FailY: ch.Height - okH - badH, FailH: badH,
			Label: at + " UTC", Delivered: ok[i], Bad: bad[i],
		})
	}
	return ch, nil
}

// step is one entry of a run's timeline: a history entry and the delivery attempts of
// the message that carried it.
type step struct {
	Index     int
	Name      string
	Type      string
	CallType  string
	MessageID string
	CreatedAt int64
	Out       string
	Attempts  []delivery.LogEvent // oldest first
}

type runView struct {
	Run       *delivery.RunWithHistory
	Steps     []step
	Waterfall waterfall // waterfall.go
	Stream    string    // the run's live stream ("": none; the page polls)
	Wait      string
	WaitSince time.Time
	Capped    bool
}

func (c *Console) timeline(r *http.Request, project string, run *delivery.RunWithHistory) (runView, error) {
	v := runView{Run: run}
	byMsg := map[string]int{}
	for i, h := range run.History {
		s := step{Index: i, CallType: h.CallType, MessageID: h.MessageID, CreatedAt: h.CreatedAt}
		if i == 0 {
			s.Name, s.Type, s.Out = "init", "Initial", showBytes(h.Body)
		} else {
			var body struct {
				StepName string          `json:"stepName"`
				StepType string          `json:"stepType"`
				Out      json.RawMessage `json:"out"`
			}
			if err := json.Unmarshal(h.Body, &body); err != nil {
				s.Out = showBytes(h.Body)
			} else {
				s.Name, s.Type, s.Out = body.StepName, body.StepType, showOut(body.Out)
			}
		}
		if _, seen := byMsg[h.MessageID]; !seen && h.MessageID != "" {
			byMsg[h.MessageID] = len(v.Steps)
		}
		v.Steps = append(v.Steps, s)
	}
	_, capped, err := c.scanLogs(r.Context(), project, "", run.CreatedAt-1000, func(ev *delivery.LogEvent) bool {
		if i, ok := byMsg[ev.MessageID]; ok && len(v.Steps[i].Attempts) < 100 {
			v.Steps[i].Attempts = append(v.Steps[i].Attempts, *ev)
		}
		return true
	})
	if err != nil {
		return v, err
	}
	v.Capped = capped
	for i := range v.Steps {
		slices.Reverse(v.Steps[i].Attempts)
	}
	if run.Live() {
		reason, since, ok, err := c.engine.RunWaitReason(r.Context(), project, run.ID)
		if err != nil {
			return v, err
		}
		if ok {
			v.Wait, v.WaitSince = reason, since
		}
	}
	return v, nil
}

// showOut shows a step's output: the SDK sends it as a JSON string holding JSON.
func showOut(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return showBytes([]byte(s))
	}
	return showBytes(raw)
}

type messagesData struct {
	ID, URL, State string
	States         []string
	Message        *delivery.Message
	Wait           string
	WaitSince      time.Time
	Events         []delivery.LogEvent
	Next           string
	Capped         bool
}

var logStates = []string{delivery.StateCreated, "ACTIVE", delivery.StateRetry, delivery.StateDelivered, delivery.StateError, delivery.StateFailed, delivery.StateCancelled}

func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	project := sessionOf(r).project
	var d messagesData
	var errs []error
	for name, p := range map[string]*string{"id": &d.ID, "url": &d.URL, "state": &d.State, "cursor": &d.Next} {
		v, err := query(r, name)
		errs = append(errs, err)
		*p = v
	}
	if d.State != "" && !slices.Contains(logStates, d.State) {
		errs = append(errs, errors.New("state: want one of "+strings.Join(logStates, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d.States = logStates
	if d.ID != "" {
		m, err := c.engine.Message(r.Context(), project, d.ID)
		switch {
		case err == nil:
			d.Message = m
			reason, since, ok, err := c.engine.WaitReason(r.Context(), project, d.ID)
			if err != nil {
				c.failErr(w, r, err)
				return
			}
			if ok {
				d.Wait, d.WaitSince = reason, since
			}
		case !errors.Is(err, delivery.ErrNotFound): // delivered messages are gone: their logs remain
			c.failErr(w, r, err)
			return
		}
	}
	cursor := d.Next
	next, capped, err := c.scanLogs(r.Context(), project, cursor, 0, func(ev *delivery.LogEvent) bool {
		if (d.ID == "" || ev.MessageID == d.ID) && (d.State == "" || ev.State == d.State) && (d.URL == "" || strings.Contains(ev.URL, d.URL)) {
			d.Events = append(d.Events, *ev)
		}
		return len(d.Events) < listEntries
	})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Next, d.Capped = next, capped
	c.render(w, r, http.StatusOK, "messages", pageData{Title: "Messages and logs", Nav: "messages", Data: d})
}

func urlPath(s string) string  { return url.PathEscape(s) }
func urlQuery(s string) string { return url.QueryEscape(s) }
