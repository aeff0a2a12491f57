package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/sdk/wire"
)

// The native API's verbs for a person at a terminal: events send, workflows list,
// runs list|get. They talk HTTP to a running server at DURATON_URL with DURATON_TOKEN
// (flags override; `duraton dev` prints both and needs no token), print a table, or
// the server's JSON with --json.

// nativeCLI is the connection of one verb.
type nativeCLI struct {
	verb   string
	base   string
	token  string
	json   bool
	stdout io.Writer
	client *http.Client
}

// newNativeFlags declares the flags every verb shares.
func newNativeFlags(verb string, stderr io.Writer, getenv func(string) string) (*flag.FlagSet, *nativeCLI) {
	e := env(getenv)
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &nativeCLI{verb: verb, client: &http.Client{Timeout: 30 * time.Second}}
	fs.StringVar(&c.base, "url", e.str("DURATON_URL", "http://127.0.0.1:8080"), "base URL of the running server (DURATON_URL)")
	fs.StringVar(&c.token, "token", e("DURATON_TOKEN"), "the project's API token (DURATON_TOKEN; not needed by `duraton dev`)")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON answer instead of a table")
	return fs, c
}

// parseInterspersed parses flags given before, between or after the positional
// arguments (`runs get ID --json`), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// call sends one request and decodes the 2xx answer into out (raw keeps the body for
// --json). Errors say what to do about them.
func (c *nativeCLI) call(ctx context.Context, method, path string, query url.Values, body []byte, out any) ([]byte, error) {
	u := strings.TrimSuffix(c.base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: --url %q: %w", c.verb, c.base, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot reach Duraton at %s (is it running? set DURATON_URL or --url): %w", c.verb, c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", c.verb, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb wire.ErrorBody
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			msg = eb.Error
		}
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (set DURATON_TOKEN or --token to the project's API token)"
		}
		return nil, fmt.Errorf("%s: the server answered %d: %s%s", c.verb, resp.StatusCode, msg, hint)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s: the server's answer is not what this version of duraton reads: %w", c.verb, err)
		}
	}
	return raw, nil
}

// printJSON prints the server's answer indented.
func (c *nativeCLI) printJSON(raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("%s: the server's answer is not JSON: %w", c.verb, err)
	}
	buf.WriteByte('\n')
	_, err := c.stdout.Write(buf.Bytes())
	return err
}

func (c *nativeCLI) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
}

// msTime renders unix milliseconds as RFC 3339 UTC ("-" for none).
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runEvents is `duraton events send NAME [DATA]`.
func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "send" {
		fmt.Fprintln(stderr, "usage: duraton events send NAME [DATA] [--dedupe-id ID] [--url URL] [--token TOKEN] [--json]\n  DATA is JSON (default {}); quote a string: '\"text\"'")
		return errUsage
	}
	fs, c := newNativeFlags("events send", stderr, getenv)
	c.stdout = stdout
	dedupe := fs.String("dedupe-id", "", "drop the event if this id was sent within 24 h")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return fmt.Errorf("events send: want NAME and optionally DATA, got %d arguments", len(pos))
	}
	data := json.RawMessage("{}")
	if len(pos) == 2 {
		if !json.Valid([]byte(pos[1])) {
			return fmt.Errorf("events send: DATA %q is not JSON (quote a string: '\"text\"')", pos[1])
		}
		data = json.RawMessage(pos[1])
	}
	body, err := json.Marshal(wire.EventIn{Name: pos[0], Data: data, DedupeID: *dedupe})
	if err != nil {
		return fmt.Errorf("events send: %w", err)
	}
	var out struct {
		Events []wire.EventResult `json:"events"`
	}
	raw, err := c.call(ctx, http.MethodPost, "/events", nil, body, &out)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	if len(out.Events) != 1 {
		return fmt.Errorf("events send: the server answered %d results for one event", len(out.Events))
	}
	ev := out.Events[0]
	switch {
	case ev.Deduped:
		fmt.Fprintf(stdout, "event %s: deduped (dedupe id %q was already sent; nothing started)\n", ev.ID, *dedupe)
		return nil
	case len(ev.Runs) == 0:
		fmt.Fprintf(stdout, "event %s: stored; no workflow is triggered by %q\n", ev.ID, pos[0])
		return nil
	}
	fmt.Fprintf(stdout, "event %s\n", ev.ID)
	tw := c.table()
	fmt.Fprintln(tw, "WORKFLOW\tOUTCOME\tRUN")
	for _, r := range ev.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Workflow, outcome(r), dash(r.RunID+r.HolderRunID))
	}
	return tw.Flush()
}

// outcome names what one workflow did with an event.
func outcome(r wire.EventRun) string {
	switch {
	case r.RunID != "":
		return "started"
	case r.Dropped:
		return "dropped (rateLimit)"
	case r.Deduped:
		return "deduped (idempotency)"
	case r.Skipped:
		return "skipped (singleton; holder run)"
	case r.Debounced:
		return "debounced"
	case r.Batched:
		return "batched"
	}
	return "unknown"
}

// runWorkflows is `duraton workflows list [--app APP]`.
func runWorkflows(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintln(stderr, "usage: duraton workflows list [--app APP] [--url URL] [--token TOKEN] [--json]")
		return errUsage
	}
	fs, c := newNativeFlags("workflows list", stderr, getenv)
	c.stdout = stdout
	app := fs.String("app", "", "only this app's workflows")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("workflows list: unexpected argument %q", pos[0])
	}
	q := url.Values{}
	if *app != "" {
		q.Set("app", *app)
	}
	var out struct {
		Workflows []wire.RegisteredWorkflow `json:"workflows"`
	}
	raw, err := c.call(ctx, http.MethodGet, "/workflows", q, nil, &out)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	if len(out.Workflows) == 0 {
		fmt.Fprintln(stdout, "no workflows registered (register an app with PUT /apps/{app})")
		return nil
	}
	tw := c.table()
	fmt.Fprintln(tw, "APP\tWORKFLOW\tTRIGGERS\tCONTROLS\tURL")
	for _, w := range out.Workflows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.App, w.Name, strings.Join(triggerNames(w.Triggers), ","), dash(controlNames(w.FlowControl)), w.URL)
	}
	return tw.Flush()
}

// triggerNames are a definition's triggers in a table cell: event names, and cron
// schedules as cron(expr[ zone]).
func triggerNames(ts []wire.Trigger) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		switch {
		case t.Cron != "" && t.TZ != "":
			out[i] = "cron(" + t.Cron + " " + t.TZ + ")"
		case t.Cron != "":
			out[i] = "cron(" + t.Cron + ")"
		default:
			out[i] = t.Event
		}
	}
	return out
}

// controlNames lists the controls a workflow has on.
func controlNames(c wire.Controls) string {
	var on []string
	add := func(set bool, name string) {
		if set {
			on = append(on, name)
		}
	}
	add(len(c.Concurrency) > 0, "concurrency")
	add(c.Throttle != nil, "throttle")
	add(c.RateLimit != nil, "rateLimit")
	add(c.Debounce != nil, "debounce")
	add(c.Batch != nil, "batch")
	add(c.Priority != nil, "priority")
	add(c.Singleton != nil, "singleton")
	add(c.Idempotency != nil, "idempotency")
	add(c.Cap != nil, "cap")
	add(c.TokenThrottle != nil, "tokenThrottle")
	return strings.Join(on, ",")
}

// runRuns is `duraton runs list [filters]` and `duraton runs get ID`.
func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "get") {
		fmt.Fprintln(stderr, "usage: duraton runs list [--workflow NAME] [--app APP] [--status STATUS] [--from T] [--to T] [--label L] [--event-name E] [--q CEL] [--limit N] [--cursor C] [--json]\n       duraton runs get RUN-ID [--json]\n  (both take --url URL and --token TOKEN)")
		return errUsage
	}
	if args[0] == "get" {
		return runRunsGet(ctx, args[1:], stdout, stderr, getenv)
	}
	fs, c := newNativeFlags("runs list", stderr, getenv)
	c.stdout = stdout
	workflow := fs.String("workflow", "", "only this workflow's runs")
	app := fs.String("app", "", "only this app's runs")
	status := fs.String("status", "", "only runs in this status (queued, running, sleeping, waiting, succeeded, failed, cancelled)")
	from := fs.String("from", "", "only runs created at or after this time (RFC 3339 or unix ms)")
	to := fs.String("to", "", "only runs created at or before this time (RFC 3339 or unix ms)")
	label := fs.String("label", "", "only runs with this label")
	eventName := fs.String("event-name", "", "only runs started by an event of this name")
	cel := fs.String("q", "", `only runs whose triggering event matches this CEL condition (event.data.accountId == "a1")`)
	limit := fs.Int("limit", 0, "at most this many runs (server default 100)")
	cursor := fs.String("cursor", "", "the cursor printed by the previous page")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("runs list: unexpected argument %q (runs get ID reads one run)", pos[0])
	}
	q := url.Values{}
	for k, v := range map[string]string{"workflow": *workflow, "app": *app, "status": *status, "cursor": *cursor,
		"from": *from, "to": *to, "label": *label, "eventName": *eventName, "q": *cel} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit != 0 {
		q.Set("limit", fmt.Sprint(*limit))
	}
	var out struct {
		Runs   []native.RunView `json:"runs"`
		Cursor string           `json:"cursor"`
	}
	raw, err := c.call(ctx, http.MethodGet, "/runs", q, nil, &out)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	if len(out.Runs) == 0 {
		fmt.Fprintln(stdout, "no runs")
		return nil
	}
	tw := c.table()
	fmt.Fprintln(tw, "RUN\tWORKFLOW\tAPP\tSTATUS\tCREATED\tENDED\tWAITING")
	for _, r := range out.Runs {
		waiting := "-"
		if r.Waiting != nil {
			waiting = r.Waiting.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.RunID, r.Workflow, r.App, r.Status, msTime(r.CreatedAt), msTime(r.EndedAt), waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Cursor != "" {
		fmt.Fprintf(stdout, "more: duraton runs list --cursor %s\n", out.Cursor)
	}
	return nil
}

func runRunsGet(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := newNativeFlags("runs get", stderr, getenv)
	c.stdout = stdout
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("runs get: want exactly one RUN-ID")
	}
	var r native.RunView
	raw, err := c.call(ctx, http.MethodGet, "/runs/"+url.PathEscape(pos[0]), nil, nil, &r)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(raw)
	}
	tw := c.table()
	fmt.Fprintf(tw, "run\t%s\n", r.RunID)
	fmt.Fprintf(tw, "workflow\t%s (app %s)\n", r.Workflow, r.App)
	fmt.Fprintf(tw, "status\t%s\n", r.Status)
	if r.Waiting != nil {
		fmt.Fprintf(tw, "waiting\t%s since %s\n", r.Waiting.Reason, msTime(r.Waiting.Since))
	}
	fmt.Fprintf(tw, "created\t%s\n", msTime(r.CreatedAt))
	fmt.Fprintf(tw, "started\t%s\n", msTime(r.StartedAt))
	fmt.Fprintf(tw, "ended\t%s\n", msTime(r.EndedAt))
	fmt.Fprintf(tw, "events\t%s\n", dash(strings.Join(r.EventIDs, ", ")))
	if e := r.Error; e != nil {
		fmt.Fprintf(tw, "error\t%s: %s\n", e.Code, e.Message)
	}
	if by := r.CancelledBy; by != nil {
		fmt.Fprintf(tw, "cancelled by\t%s\n", cancelCause(by))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Keys)) {
		k := r.Keys[name]
		switch {
		case k.Scope == native.ScopeKey:
			fmt.Fprintf(tw, "key %s\t%s = %s\n", name, k.Path, k.Value)
		case k.Path != "":
			fmt.Fprintf(tw, "key %s\twhole workflow (%s resolved to no scalar)\n", name, k.Path)
		default:
			fmt.Fprintf(tw, "key %s\twhole workflow\n", name)
		}
	}
	if r.DLQID != "" {
		fmt.Fprintf(tw, "dead letter\t%s\n", r.DLQID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		fmt.Fprintln(stdout, "no steps recorded")
		return nil
	}
	fmt.Fprintln(stdout)
	tw = c.table()
	fmt.Fprintln(tw, "STEP\tNAME\tTYPE\tSTATUS\tENDED\tOUT")
	for _, s := range r.Steps {
		out := string(s.Out) // the step's value as JSON
		if s.Error != nil {
			out = s.Error.Code + ": " + s.Error.Message
		}
		if r := []rune(out); len(r) > 60 {
			out = string(r[:57]) + "..."
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Name, dash(s.Type), s.Status, msTime(s.EndedAt), dash(out))
	}
	return tw.Flush()
}

// cancelCause says who cancelled a run.
func cancelCause(by *delivery.CancelledBy) string {
	switch {
	case by.EventID != "":
		return "event " + by.EventID
	case by.Singleton != "":
		return "singleton, replaced by " + by.Singleton
	case by.API:
		return "the API"
	}
	return "-"
}
