package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duraton/duraton/delivery"
)

// pageData is what every page template gets.
type pageData struct {
	Title   string
	Nav     string // the active menu entry
	CSRF    string
	Error   string
	Self    string // the page's own URL, which its live part polls
	Refresh string // htmx trigger of the live part
	Login   bool   // a session that can log out
	Data    any
}

var pageNames = []string{"login", "error", "overview", "workflows", "workflow", "runs", "runsbulk", "run", "keys", "messages", "dlq", "dlqentry", "events"}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes a page, or only its live part for an htmx poll (HX-Request), so a
// refresh swaps the data and leaves the filters and the scroll position alone.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	if s := sessionOf(r); s != nil {
		d.CSRF = s.csrf
		d.Login = !c.cfg.Dev
	}
	d.Self = r.URL.RequestURI()
	d.Refresh = fmt.Sprintf("every %dms", c.cfg.Refresh.Milliseconds())
	tmpl := "layout.html"
	if r.Header.Get("HX-Request") != "" && r.Method == http.MethodGet && name != "error" {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, tmpl, d); err != nil {
		c.log.Error("console_render_failed", "page", name, "err", err)
		http.Error(w, "console: page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", pageData{Title: http.StatusText(status), Error: msg})
}

// failErr maps an engine error to a page: not found, bad input, or 500 (logged).
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := classify(err)
	if status == http.StatusInternalServerError {
		c.log.Error("console_read_failed", "path", r.URL.Path, "err", err)
	}
	c.fail(w, r, status, msg)
}

var funcs = template.FuncMap{
	"iso": func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) },
	"utc": func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05") },
	"isotime": func(t time.Time) string {
		return t.UTC().Format(time.RFC3339Nano)
	},
	"utctime": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"dur":     func(d time.Duration) string { return d.String() },
	"text":    showBytes,
	"join":    strings.Join,
	"msgbody": msgBody,
	"dict":    func(csrf, id string) map[string]string { return map[string]string{"CSRF": csrf, "ID": id} },
	"bulkForm": func(csrf string, d bulkData, step, cursor string) bulkForm {
		return bulkForm{CSRF: csrf, D: d, Step: step, Cursor: cursor}
	},
	"pct": func(n, max int) int {
		if max <= 0 {
			return 0
		}
		return min(100, n*100/max)
	},
}

// maxShown caps a body shown on a page.
const maxShown = 64 << 10

// showBytes shows a body as text: indented when it is JSON, cut at maxShown, and marked
// when it is not UTF-8.
func showBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	cut := ""
	if len(b) > maxShown {
		b, cut = b[:maxShown], fmt.Sprintf("\n… (%d more bytes not shown)", len(b)-maxShown)
	}
	var out bytes.Buffer
	if json.Valid(b) && json.Indent(&out, b, "", "  ") == nil {
		return out.String() + cut
	}
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes of binary data)", len(b))
	}
	return string(b) + cut
}

// msgBody shows a message body unless Upstash-Redact-Fields hides it.
func msgBody(v any) string {
	var m *delivery.Message
	switch v := v.(type) {
	case *delivery.Message:
		m = v
	case delivery.Message:
		m = &v
	default:
		return fmt.Sprintf("(not a message: %T)", v)
	}
	if m.Redact != nil && m.Redact.Body {
		return "(redacted: Upstash-Redact-Fields)"
	}
	return showBytes(m.Body)
}
