package native

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl/expr"
)

// RunSearch is the run filters as written: the query parameters of GET /runs, the JSON
// body of the bulk run operations, and the console's search form. Filter validates it,
// so every one of them refuses the same bad filter with the same message.
type RunSearch struct {
	Workflow  string          `json:"workflow"`
	App       string          `json:"app"`
	Status    string          `json:"status"`
	Label     string          `json:"label"`
	EventName string          `json:"eventName"`
	Q         string          `json:"q"`
	From      json.RawMessage `json:"from"`
	To        json.RawMessage `json:"to"`
}

// maxFilterValue bounds a name filter's length (workflow names are at most 128, event
// names and labels at most 256).
const maxFilterValue = 256

// SearchOfQuery reads the filters of a query string (GET /runs, the console's form).
func SearchOfQuery(get func(string) string) RunSearch {
	s := RunSearch{Workflow: get("workflow"), App: get("app"), Status: get("status"), Label: get("label"),
		EventName: get("eventName"), Q: get("q")}
	if v := get("from"); v != "" {
		s.From = json.RawMessage(strconv.Quote(v))
	}
	if v := get("to"); v != "" {
		s.To = json.RawMessage(strconv.Quote(v))
	}
	return s
}

// Filter validates the filters into a RunFilter; a bad one is an ErrInvalid naming it.
func (s RunSearch) Filter() (RunFilter, error) {
	f := RunFilter{Workflow: s.Workflow, App: s.App, Status: s.Status, Label: s.Label, EventName: s.EventName}
	for _, p := range []struct{ name, v string }{{"workflow", s.Workflow}, {"app", s.App}, {"label", s.Label}, {"eventName", s.EventName}} {
		if len(p.v) > maxFilterValue {
			return f, invalid("%s: at most %d bytes, got %d", p.name, maxFilterValue, len(p.v))
		}
	}
	if f.Status != "" && !IsStatus(f.Status) {
		return f, invalid("status: %q is not a run status (queued, running, sleeping, waiting, succeeded, failed, cancelled)", f.Status)
	}
	var err error
	if f.From, err = parseRunTime("from", s.From); err != nil {
		return f, err
	}
	if f.To, err = parseRunTime("to", s.To); err != nil {
		return f, err
	}
	if f.From > 0 && f.To > 0 && f.From > f.To {
		return f, invalid("from: %d is after to (%d)", f.From, f.To)
	}
	if s.Q != "" {
		prg, err := expr.Compile(s.Q, "event")
		if err == nil {
			err = prg.CheckBool()
		}
		if err != nil {
			return f, invalid("q: %s", err.Error())
		}
		f.Event = eventCondition(prg)
	}
	return f, nil
}

// eventCondition evaluates a q program over a run's initial payload ({id, name, data,
// ts, events}) under the expression cost limit; an evaluation error does not match.
func eventCondition(prg *expr.Program) func(payload []byte) bool {
	return func(payload []byte) bool {
		ev, err := expr.FromJSON(payload)
		if err != nil || ev == nil {
			return false
		}
		ok, err := prg.Bool(map[string]any{"event": ev})
		return err == nil && ok
	}
}

// parseRunTime reads a from/to bound: RFC 3339 or unix milliseconds, as a JSON string
// or number; absent is 0 (open).
func parseRunTime(name string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	text := string(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text = s
	}
	text = strings.TrimSpace(text)
	if ms, err := strconv.ParseInt(text, 10, 64); err == nil {
		if ms < 0 {
			return 0, invalid("%s: want a time at or after 1970, got %d", name, ms)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil || t.Before(time.Unix(0, 0)) {
		return 0, invalid("%s: want an RFC 3339 time or unix milliseconds, got %s", name, quoteShort(text))
	}
	return t.UnixMilli(), nil
}

func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// FormatCursor writes a run listing position as the opaque cursor the API returns.
func FormatCursor(c *delivery.RunCursor) string {
	if c == nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt, 10) + "." + c.RunID))
}

// ParseCursor reads a cursor FormatCursor wrote ("" is nil: from the newest).
func ParseCursor(s string) (*delivery.RunCursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	ms, id, ok := strings.Cut(string(raw), ".")
	n, nerr := strconv.ParseInt(ms, 10, 64)
	if err != nil || !ok || nerr != nil || id == "" {
		return nil, invalid("cursor: %q is not a cursor returned by this API", s)
	}
	return &delivery.RunCursor{CreatedAt: n, RunID: id}, nil
}
