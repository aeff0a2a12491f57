package console

import (
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery"
)

// A run's waterfall: one row per step on the run's time axis (from its creation to its
// end, or now), the bar covering where the time went before the step was recorded, and
// on it a thin bar per delivery attempt of the call that produced the step, coloured by
// its outcome. Sleep and wait steps are drawn as gaps. Drawn server-side as inline SVG:
// no script, nothing the CSP has to allow.

// waterfall is what run.html draws.
type waterfall struct {
	Rows          []wfRow
	Width, Height int
	Total         string // the axis' length in words
	Attempts      int
}

type wfRow struct {
	Label    string
	Y, TextY int
	X, W     int    // the step's bar
	Kind     string // run, sleep, wait, start, finish
	Title    string
	Attempts []wfBar
}

type wfBar struct {
	X, W, Y int
	State   string // DELIVERED, ERROR, FAILED
	Title   string
}

const (
	wfWidth  = 1000
	wfLabel  = 220 // the label column
	wfRowH   = 26
	wfMinBar = 3
)

// buildWaterfall lays out v's steps and attempts, now being the end of a live run's axis.
func buildWaterfall(v *runView, now time.Time) waterfall {
	run := v.Run
	t0, t1 := run.CreatedAt, run.EndedAt
	if t1 == 0 {
		t1 = now.UnixMilli()
	}
	if t1 <= t0 {
		t1 = t0 + 1
	}
	span := float64(t1 - t0)
	x := func(ms int64) int {
		ms = min(max(ms, t0), t1)
		return wfLabel + int(float64(ms-t0)/span*float64(wfWidth-wfLabel-10))
	}
	wf := waterfall{Width: wfWidth, Total: (time.Duration(t1-t0) * time.Millisecond).Round(time.Millisecond).String()}
	prev := t0
	addRow := func(label, kind string, from, to int64, title string, attempts []delivery.LogEvent, afterGap bool) {
		y := len(wf.Rows) * wfRowH
		row := wfRow{Label: label, Y: y + 4, TextY: y + 17, X: x(from), Kind: kind, Title: title}
		row.W = max(x(to)-row.X, wfMinBar)
		row.Attempts = attemptBars(attempts, x, y+16, afterGap)
		wf.Attempts += len(row.Attempts)
		wf.Rows = append(wf.Rows, row)
	}
	// A sleep or wait is recorded when it begins; the time until the step after it is the
	// gap, drawn on the sleep's row. The step after a gap is drawn from its answer only:
	// when its delivery began within the gap is not recorded.
	for i, s := range v.Steps {
		var attempts []delivery.LogEvent
		if i > 0 {
			attempts = v.Steps[i-1].Attempts // the call that produced this step
		}
		name := s.Name
		if name == "" {
			name = "(step)"
		}
		kind := stepKind(s.Type)
		if i == 0 {
			kind = "start"
		}
		afterGap := i > 0 && isGap(stepKind(v.Steps[i-1].Type))
		from, to := prev, s.CreatedAt
		title := fmt.Sprintf("%s (%s): recorded %s after the step before", name, s.Type, (time.Duration(s.CreatedAt-prev) * time.Millisecond).Round(time.Millisecond))
		switch {
		case isGap(kind) && i+1 < len(v.Steps):
			from, to = s.CreatedAt, v.Steps[i+1].CreatedAt
			title = fmt.Sprintf("%s (%s): %s until the next step", name, s.Type, (time.Duration(to-from) * time.Millisecond).Round(time.Millisecond))
		case afterGap:
			from = to
		}
		addRow(fmt.Sprintf("%d. %s", s.Index, name), kind, from, to, title, attempts, afterGap)
		prev = s.CreatedAt
	}
	if n := len(v.Steps); n > 0 && len(v.Steps[n-1].Attempts) > 0 {
		addRow("end", "finish", prev, t1, "the call after the last step", v.Steps[n-1].Attempts, isGap(stepKind(v.Steps[n-1].Type)))
	}
	wf.Height = max(len(wf.Rows), 1)*wfRowH + 20
	return wf
}

func isGap(kind string) bool { return kind == "sleep" || kind == "wait" }

// stepKind classes a step type: sleeps and waits are gaps, not work.
func stepKind(t string) string {
	switch t {
	case "SleepFor", "SleepUntil":
		return "sleep"
	case "Wait", "WaitForEvent":
		return "wait"
	}
	return "run"
}

// attemptBars draws a message's attempts: each from when it became due (the message's
// creation, or the retry time the attempt before set) to its answer; after a gap (the
// message of a sleep or wait, due at an unrecorded time) the first is drawn at its answer.
func attemptBars(events []delivery.LogEvent, x func(int64) int, y int, afterGap bool) []wfBar {
	var out []wfBar
	due := int64(0)
	for _, ev := range events {
		switch ev.State {
		case delivery.StateCreated:
			if !afterGap {
				due = ev.Time
			}
		case delivery.StateDelivered, delivery.StateError, delivery.StateFailed:
			from := due
			if from == 0 || from > ev.Time {
				from = ev.Time
			}
			b := wfBar{X: x(from), Y: y, State: ev.State}
			b.W = max(x(ev.Time)-b.X, wfMinBar)
			b.Title = fmt.Sprintf("attempt %d: %s", ev.Retried+1, ev.State)
			if ev.ResponseStatus != 0 {
				b.Title += fmt.Sprintf(" (HTTP %d)", ev.ResponseStatus)
			}
			if ev.Error != "" {
				b.Title += ": " + ev.Error
			}
			out = append(out, b)
			due = ev.Time
			if ev.NextDeliveryTime > 0 {
				due = ev.NextDeliveryTime
			}
		}
	}
	return out
}
