package sdk

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/duraton/duraton/sdk/wire"
)

// Workflow is a native workflow defined in code: its name, the events that start it,
// its flow controls (docs/protocol.md, "Controls"; a nil or empty control is off) and the route
// that runs it. An App serves every workflow that has a Handler and registers all of
// them.
type Workflow struct {
	// Name is unique in the project: 1–128 characters of [A-Za-z0-9._:-].
	Name string
	// Triggers are the event names that start the workflow; with Crons, 1–16 in all.
	Triggers []string
	// Crons are schedules that start the workflow: each fire is an event named
	// wire.CronEventName whose data is a wire.CronData.
	Crons []Cron
	// Retries of each delivery; nil takes the server's default (3).
	Retries *int

	Concurrency   []Concurrency // at most 2 constraints
	Throttle      *Rate
	RateLimit     *Rate
	Debounce      *Debounce
	Batch         *Batch
	Priority      *Priority
	Singleton     *Singleton
	Idempotency   *Idempotency
	Cap           *Cap
	TokenThrottle *TokenThrottle
	// CancelOn are events that cancel the workflow's live runs they match (at most 8).
	CancelOn []CancelOn

	// Handler runs the workflow; the App serves it at URL. Nil: the workflow is served
	// elsewhere (another process, a TypeScript serve() route) and URL is required.
	Handler RouteFunc
	// URL is where Duraton delivers the workflow's steps. Empty: the App's base URL
	// followed by "/" and Name.
	URL string
	// Options are added after the App's options for this workflow's handler (for
	// example WithFailureFunction).
	Options []ServeOption
}

// Cron is a cron trigger: Expr has five fields (minute hour day-of-month month
// day-of-week) read in the IANA zone TZ (UTC when empty). Fires are durable and at most
// once per instant; after downtime only the most recent missed instant fires, late.
type Cron struct {
	Expr string
	TZ   string
}

// App is one deployment's native workflows: one http.Handler that serves each workflow
// with a Handler at the path of its URL (by default baseURL + "/" + Name), and the
// definitions Client.RegisterApp sends. Mount it where baseURL points, e.g.
// http.Handle("/workflows/", app) for https://example.com/workflows.
type App struct {
	name      string
	workflows []Workflow
	urls      []string
	routes    map[string]http.Handler
}

// NewApp checks the definitions and builds the app's handler. opts apply to every
// workflow's handler (Serve's options: credentials, verification, ...). baseURL is the
// absolute URL the App is reachable at; it may be empty when every workflow names its
// own URL.
func NewApp(name, baseURL string, workflows []Workflow, opts ...ServeOption) (*App, error) {
	if name == "" {
		return nil, errors.New("sdk: NewApp: the app name is required")
	}
	if len(workflows) == 0 {
		return nil, fmt.Errorf("sdk: NewApp %s: at least one workflow is required", name)
	}
	base := strings.TrimSuffix(baseURL, "/")
	if base != "" {
		if err := checkAbsURL(base); err != nil {
			return nil, fmt.Errorf("sdk: NewApp %s: baseURL: %w", name, err)
		}
	}
	a := &App{name: name, workflows: append([]Workflow(nil), workflows...), urls: make([]string, len(workflows)), routes: map[string]http.Handler{}}
	seen := map[string]bool{}
	for i, w := range a.workflows {
		if err := checkWorkflowName(w.Name); err != nil {
			return nil, fmt.Errorf("sdk: NewApp %s: workflows[%d]: %w", name, i, err)
		}
		if seen[w.Name] {
			return nil, fmt.Errorf("sdk: NewApp %s: workflow %s is defined twice", name, w.Name)
		}
		seen[w.Name] = true
		u := w.URL
		switch {
		case u == "" && w.Handler == nil:
			return nil, fmt.Errorf("sdk: NewApp %s: workflow %s: needs a Handler or a URL", name, w.Name)
		case u == "" && base == "":
			return nil, fmt.Errorf("sdk: NewApp %s: workflow %s: no URL and no baseURL to derive it from", name, w.Name)
		case u == "":
			u = base + "/" + w.Name
		}
		if err := checkAbsURL(u); err != nil {
			return nil, fmt.Errorf("sdk: NewApp %s: workflow %s: url: %w", name, w.Name, err)
		}
		a.urls[i] = u
		if w.Handler == nil {
			continue
		}
		parsed, _ := url.Parse(u) // checked above
		path := parsed.EscapedPath()
		if _, dup := a.routes[path]; dup {
			return nil, fmt.Errorf("sdk: NewApp %s: workflow %s: path %s is served by another workflow", name, w.Name, path)
		}
		// The registered URL is what Duraton signs for, so it is the subject to check
		// (a caller's own WithWorkflowURL in opts still wins).
		all := append([]ServeOption{WithWorkflowURL(u)}, opts...)
		a.routes[path] = Serve(w.Handler, append(all, w.Options...)...)
	}
	return a, nil
}

// Name is the app's name.
func (a *App) Name() string { return a.name }

// URL is where the named workflow is delivered ("" when the app has no such workflow).
func (a *App) URL(workflow string) string {
	for i, w := range a.workflows {
		if w.Name == workflow {
			return a.urls[i]
		}
	}
	return ""
}

// ServeHTTP hands the request to the workflow served at its path; another path is a
// 404.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := a.routes[r.URL.EscapedPath()]
	if !ok {
		writeJSON(w, http.StatusNotFound, wire.ErrorBody{Error: fmt.Sprintf("app %s serves no workflow at %s", a.name, r.URL.Path)})
		return
	}
	h.ServeHTTP(w, r)
}

// Definition is the body of PUT /apps/{app} for the app's workflows.
func (a *App) Definition() wire.AppDefinition {
	out := wire.AppDefinition{Workflows: make([]wire.WorkflowDefinition, len(a.workflows))}
	for i, w := range a.workflows {
		ts := make([]wire.Trigger, 0, len(w.Triggers)+len(w.Crons))
		for _, e := range w.Triggers {
			ts = append(ts, wire.Trigger{Event: e})
		}
		for _, c := range w.Crons {
			ts = append(ts, wire.Trigger{Cron: c.Expr, TZ: c.TZ})
		}
		out.Workflows[i] = wire.WorkflowDefinition{Name: w.Name, URL: a.urls[i], Triggers: ts, Retries: w.Retries, CancelOn: w.CancelOn,
			Controls: wire.Controls{Concurrency: w.Concurrency, Throttle: w.Throttle, RateLimit: w.RateLimit,
				Debounce: w.Debounce, Batch: w.Batch, Priority: w.Priority, Singleton: w.Singleton,
				Idempotency: w.Idempotency, Cap: w.Cap, TokenThrottle: w.TokenThrottle}}
	}
	return out
}

func checkAbsURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", u)
	}
	return nil
}

// checkWorkflowName keeps the name usable as a path segment; the server checks the
// rest of the definition.
func checkWorkflowName(n string) error {
	if n == "" || len(n) > 128 {
		return fmt.Errorf("name: want 1–128 characters, got %d", len(n))
	}
	for _, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return fmt.Errorf("name %q: want [A-Za-z0-9._:-]", n)
		}
	}
	return nil
}
