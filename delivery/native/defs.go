package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// Definition limits (docs/protocol.md, "Native workflows"; openapi.yaml has the fields).
const (
	MaxNameLen      = 128
	MaxTriggers     = 16
	MaxEventNameLen = 256
	MaxRetries      = 100
	DefaultRetries  = 3
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// Workflow is a stored definition; App an app; Trigger an event name that starts a
// workflow.
type (
	Workflow = storage.WorkflowDef
	App      = storage.App
	Trigger  = storage.Trigger
	CancelOn = storage.CancelOn
)

// workflowFields are the definition fields besides the controls.
var workflowFields = []string{"name", "url", "triggers", "retries", "cancelOn"}

// ParseApp reads a PUT /apps/{app} body ({"workflows": [...]}) into normalized
// definitions, strictly: every error names the workflow and the field. URLs are checked
// with Config.CheckURL.
func (s *Service) ParseApp(app string, body []byte) ([]Workflow, error) {
	if err := checkName("app", app); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, invalid("the body must be a JSON object {\"workflows\": [...]}")
	}
	for k := range top {
		if k != "workflows" {
			return nil, invalid("unknown field %q (the body is {\"workflows\": [...]})", k)
		}
	}
	raw, ok := top["workflows"]
	if !ok {
		return nil, invalid("field \"workflows\" is required")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, invalid("field \"workflows\" must be an array of workflow definitions")
	}
	if len(items) > s.cfg.MaxWorkflowsPerApp {
		return nil, fmt.Errorf("%w: %d workflows in app %q, the limit is %d", ErrLimit, len(items), app, s.cfg.MaxWorkflowsPerApp)
	}
	out := make([]Workflow, 0, len(items))
	seen := map[string]int{}
	for i, it := range items {
		d, err := s.parseWorkflow(i, it)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[d.Name]; dup {
			return nil, invalid("workflow %q (workflows[%d]): field \"name\": also the name of workflows[%d]", d.Name, i, j)
		}
		seen[d.Name] = i
		d.App = app
		out = append(out, d)
	}
	return out, nil
}

func (s *Service) parseWorkflow(i int, raw json.RawMessage) (Workflow, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Workflow{}, invalid("workflows[%d]: a workflow definition must be a JSON object", i)
	}
	who := fmt.Sprintf("workflows[%d]", i)
	var name string
	if rn, ok := fields["name"]; ok && json.Unmarshal(rn, &name) == nil && name != "" {
		who = fmt.Sprintf("workflow %q (workflows[%d])", name, i)
	}
	fail := func(field, format string, args ...any) error {
		return invalid("%s: field %q: %s", who, field, fmt.Sprintf(format, args...))
	}
	var unknown []string
	for k := range fields {
		if !contains(workflowFields, k) && !contains(flowctl.ControlNames, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Workflow{}, fail(unknown[0], "unknown field (a workflow has %s, %s)", strings.Join(workflowFields, ", "), strings.Join(flowctl.ControlNames, ", "))
	}
	d := Workflow{Name: name, Retries: DefaultRetries}
	if _, ok := fields["name"]; !ok {
		return Workflow{}, fail("name", "is required")
	}
	if err := json.Unmarshal(fields["name"], &d.Name); err != nil {
		return Workflow{}, fail("name", "want a string")
	}
	if err := nameError(d.Name); err != nil {
		return Workflow{}, fail("name", "%v", err)
	}
	var rawURL string
	if err := json.Unmarshal(fields["url"], &rawURL); err != nil || rawURL == "" {
		return Workflow{}, fail("url", "an absolute http(s) URL is required")
	}
	u, err := s.cfg.CheckURL(rawURL)
	if err != nil {
		return Workflow{}, fail("url", "%v", err)
	}
	d.URL = u.String()
	triggers, ok := fields["triggers"]
	if !ok {
		return Workflow{}, fail("triggers", "is required: [{\"event\": \"name\"} or {\"cron\": \"0 * * * *\", \"tz\"?: \"UTC\"}, ...]")
	}
	var trs []json.RawMessage
	if err := json.Unmarshal(triggers, &trs); err != nil || len(trs) == 0 || len(trs) > MaxTriggers {
		return Workflow{}, fail("triggers", "want an array of 1 to %d {\"event\": \"name\"} or {\"cron\": \"...\", \"tz\"?: \"...\"} objects", MaxTriggers)
	}
	for j, tr := range trs {
		t, field, err := parseTrigger(fmt.Sprintf("triggers[%d]", j), tr, d.Triggers)
		if err != nil {
			return Workflow{}, fail(field, "%v", err)
		}
		d.Triggers = append(d.Triggers, t)
	}
	if rr, ok := fields["retries"]; ok {
		if err := json.Unmarshal(rr, &d.Retries); err != nil || d.Retries < 0 || d.Retries > MaxRetries {
			return Workflow{}, fail("retries", "want an integer from 0 to %d", MaxRetries)
		}
	}
	d.FlowControl, err = flowctl.ParseControls(fields)
	if err == nil {
		err = s.compileDef(&d)
	}
	if raw, ok := fields["cancelOn"]; ok && err == nil {
		d.CancelOn, err = s.parseCancelOn(raw)
	}
	if err != nil {
		var fe *flowctl.FieldError
		if errors.As(err, &fe) {
			return Workflow{}, fail(fe.Field, "%s", fe.Msg)
		}
		return Workflow{}, fail("flowControl", "%v", err)
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func checkName(what, name string) error {
	if err := nameError(name); err != nil {
		return invalid("%s: %v", what, err)
	}
	return nil
}

func nameError(name string) error {
	if name == "" || len(name) > MaxNameLen || !namePattern.MatchString(name) {
		return fmt.Errorf("%q: want 1 to %d characters of A-Z a-z 0-9 . _ : -", name, MaxNameLen)
	}
	return nil
}

// checkEventName accepts 1–256 bytes of UTF-8 text without control characters.
func checkEventName(name string) error {
	if name == "" || len(name) > MaxEventNameLen {
		return fmt.Errorf("an event name is 1 to %d bytes, got %d", MaxEventNameLen, len(name))
	}
	if !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return fmt.Errorf("event name %q must be UTF-8 text without control characters", name)
	}
	return nil
}

// PutApp registers or replaces an app's whole set of workflows in one transaction and
// returns the app as stored. A name owned by another app is ErrConflict; nothing changes
// on any error.
func (s *Service) PutApp(ctx context.Context, project, app string, defs []Workflow) (*AppView, error) {
	defer s.wake() // a cron trigger's first fire may be the earliest timer now
	return delivery.NativeUpdate(ctx, s.engine, func(n *delivery.NativeTx) (*AppView, error) {
		tx, now := n.Tx, n.Now.UnixMilli()
		old, err := tx.App(project, app)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			if c := tx.AppCount(project); c >= s.cfg.MaxApps {
				return nil, fmt.Errorf("%w: the project has %d apps, the limit is %d", ErrLimit, c, s.cfg.MaxApps)
			}
			old = &App{Name: app, CreatedAt: now}
		case err != nil:
			return nil, err
		}
		keep := map[string]bool{}
		for _, d := range defs {
			keep[d.Name] = true
		}
		for _, name := range old.Workflows {
			if keep[name] {
				continue
			}
			if err := s.dropWorkflowTx(tx, project, name); err != nil {
				return nil, err
			}
		}
		out := make([]Workflow, len(defs))
		names := make([]string, len(defs))
		for i, d := range defs {
			d.App, d.CreatedAt, d.UpdatedAt = app, now, now
			prev, err := tx.WorkflowDef(project, d.Name)
			switch {
			case err == nil && prev.App != app:
				return nil, fmt.Errorf("%w: workflow %q (workflows[%d]): field \"name\": the name belongs to app %q", ErrConflict, d.Name, i, prev.App)
			case err == nil:
				d.CreatedAt = prev.CreatedAt
				if err := tx.DeleteWorkflowDef(project, d.Name); err != nil {
					return nil, err
				}
			case !errors.Is(err, storage.ErrNotFound):
				return nil, err
			}
			if err := tx.PutWorkflowDef(project, &d); err != nil {
				return nil, err
			}
			if err := armCronTx(tx, project, &d, n.Now); err != nil {
				return nil, err
			}
			out[i], names[i] = d, d.Name
		}
		sort.Strings(names)
		rec := App{Name: app, Workflows: names, CreatedAt: old.CreatedAt, UpdatedAt: now}
		if err := tx.PutApp(project, &rec); err != nil {
			return nil, err
		}
		return &AppView{App: rec, Workflows: out}, nil
	})
}

// dropWorkflowTx removes a definition, its gate states and its buffered events.
func (s *Service) dropWorkflowTx(tx *storage.Tx, project, name string) error {
	if err := tx.DeleteWorkflowDef(project, name); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := tx.DeleteGatesWithPrefix(project, gatePrefix(name)); err != nil {
		return err
	}
	if err := tx.DeleteCronTimers(project, name); err != nil {
		return err
	}
	return tx.DeleteGateBuffersWithPrefix(project, gatePrefix(name))
}

// DeleteApp removes an app and its workflows: no new runs start; running runs finish.
func (s *Service) DeleteApp(ctx context.Context, project, app string) error {
	_, err := delivery.NativeUpdate(ctx, s.engine, func(n *delivery.NativeTx) (struct{}, error) {
		a, err := n.Tx.App(project, app)
		if errors.Is(err, storage.ErrNotFound) {
			return struct{}{}, fmt.Errorf("app %q: %w", app, ErrNotFound)
		}
		if err != nil {
			return struct{}{}, err
		}
		for _, name := range a.Workflows {
			if err := s.dropWorkflowTx(n.Tx, project, name); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, n.Tx.DeleteApp(project, app)
	})
	return err
}

// AppView is an app with its definitions.
type AppView struct {
	App       App
	Workflows []Workflow
}

// GetApp reads an app with its definitions.
func (s *Service) GetApp(ctx context.Context, project, app string) (*AppView, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *AppView
	err := s.store.View(func(tx *storage.Tx) error {
		a, err := tx.App(project, app)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("app %q: %w", app, ErrNotFound)
		}
		if err != nil {
			return err
		}
		v := &AppView{App: *a}
		for _, name := range a.Workflows {
			d, err := tx.WorkflowDef(project, name)
			if err != nil {
				return fmt.Errorf("app %q workflow %q: %w", app, name, err)
			}
			v.Workflows = append(v.Workflows, *d)
		}
		out = v
		return nil
	})
	return out, err
}

// Apps lists a project's apps by name.
func (s *Service) Apps(ctx context.Context, project string) ([]App, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []App
	err := s.store.View(func(tx *storage.Tx) error {
		var err error
		out, err = tx.Apps(project)
		return err
	})
	return out, err
}

// Workflows lists a project's definitions by name, those of app only when app is set.
func (s *Service) Workflows(ctx context.Context, project, app string) ([]Workflow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Workflow
	err := s.store.View(func(tx *storage.Tx) error {
		all, err := tx.WorkflowDefs(project)
		for _, d := range all {
			if app == "" || d.App == app {
				out = append(out, d)
			}
		}
		return err
	})
	return out, err
}

// Workflow reads one definition.
func (s *Service) Workflow(ctx context.Context, project, name string) (*Workflow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *Workflow
	err := s.store.View(func(tx *storage.Tx) error {
		d, err := tx.WorkflowDef(project, name)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("workflow %q: %w", name, ErrNotFound)
		}
		out = d
		return err
	})
	return out, err
}
