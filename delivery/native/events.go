package native

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// MaxDedupeIDLen caps an event dedupeId.
const MaxDedupeIDLen = 256

// Event is a stored event; EventRun what one workflow did with it.
type (
	Event    = storage.Event
	EventRun = storage.EventRun
)

// EventIn is one event of a POST /events request. At most one of Ts (unix ms) and Delay
// is set: the event then fans out at that time (delayed.go).
type EventIn struct {
	Name     string          `json:"name"`
	Data     json.RawMessage `json:"data"`
	DedupeID string          `json:"dedupeId"`
	Ts       int64           `json:"ts,omitempty"`
	Delay    time.Duration   `json:"-"`
}

// EventResult answers one event: its id and what each matching workflow did; Deduped
// when its dedupeId was seen within the window (Id is then the first event's id);
// ScheduledFor (unix ms) when it is delayed (Runs is then empty).
type EventResult struct {
	ID           string     `json:"id"`
	Deduped      bool       `json:"deduped,omitempty"`
	ScheduledFor int64      `json:"scheduledFor,omitempty"`
	Runs         []EventRun `json:"runs"`
	// Cancelled lists, per workflow whose cancelOn the event satisfied, the runs it
	// cancelled (cancelon.go).
	Cancelled []EventCancel `json:"cancelled,omitempty"`
}

// ParseEvents reads a POST /events body: one event object or an array of them (at most
// Config.MaxEventsPerRequest, else ErrLimit), strictly.
func (s *Service) ParseEvents(body []byte) ([]EventIn, error) {
	t := bytes.TrimSpace(body)
	var items []json.RawMessage
	single := len(t) > 0 && t[0] == '{'
	if single {
		items = []json.RawMessage{t}
	} else if err := json.Unmarshal(t, &items); err != nil || items == nil {
		return nil, invalid("the body must be an event {\"name\", \"data\", \"dedupeId\"} or an array of events")
	}
	if len(items) == 0 {
		return nil, invalid("the array holds no event")
	}
	if len(items) > s.cfg.MaxEventsPerRequest {
		return nil, fmt.Errorf("%w: %d events in one request, the limit is %d", ErrLimit, len(items), s.cfg.MaxEventsPerRequest)
	}
	out := make([]EventIn, len(items))
	for i, it := range items {
		who := fmt.Sprintf("events[%d]", i)
		if single {
			who = "event"
		}
		var in struct {
			Name     string          `json:"name"`
			Data     json.RawMessage `json:"data"`
			DedupeID *string         `json:"dedupeId"`
			Ts       *int64          `json:"ts"`
			Delay    *string         `json:"delay"`
		}
		if err := flowctl.DecodeStrict(who, it, []string{"name", "data", "dedupeId", "ts", "delay"}, &in); err != nil {
			var fe *flowctl.FieldError
			if errors.As(err, &fe) {
				return nil, invalid("%s", fe.Error())
			}
			return nil, invalid("%s: %v", who, err)
		}
		if err := checkEventName(in.Name); err != nil {
			return nil, invalid("%s.name: %v", who, err)
		}
		out[i] = EventIn{Name: in.Name, Data: in.Data}
		if d := in.DedupeID; d != nil {
			if *d == "" || len(*d) > MaxDedupeIDLen || !validText(*d) {
				return nil, invalid("%s.dedupeId: want 1 to %d bytes of text", who, MaxDedupeIDLen)
			}
			out[i].DedupeID = *d
		}
		if err := parseDelay(who, in.Ts, in.Delay, &out[i], s.cfg.Now()); err != nil {
			return nil, err
		}
		if out[i].Data == nil {
			out[i].Data = json.RawMessage("null")
		}
	}
	return out, nil
}

// IsEventID reports whether id has the shape of an event id (a listing cursor).
func IsEventID(id string) bool {
	p := storage.PrefixEvent
	if !strings.HasPrefix(id, p) || len(id) != len(p)+24 {
		return false
	}
	for _, c := range id[len(p):] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func validText(s string) bool {
	return !strings.ContainsRune(s, 0) && strings.ToValidUTF8(s, "") == s
}

// SendEvents stores events and fans each out to every workflow whose trigger names it,
// through the workflow's gates, in one transaction: when it returns, the events, their
// runs, the gate states and the waiters they woke are durable. A request that could start
// more than Config.MaxRunsPerRequest runs is ErrTooManyRuns, one that finds its project
// creating Config.MaxRunsInFlight runs already is ErrBusy: either stores nothing.
func (s *Service) SendEvents(ctx context.Context, project string, events []EventIn) ([]EventResult, error) {
	most, err := s.fanOut(project, events)
	if err != nil {
		return nil, err
	}
	if most > s.cfg.MaxRunsPerRequest {
		return nil, s.tooManyRuns(most)
	}
	release, err := s.runs.take(project, most)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := delivery.NativeUpdate(ctx, s.engine, func(n *delivery.NativeTx) ([]EventResult, error) {
		out := make([]EventResult, len(events))
		runs := 0
		for i, in := range events {
			r, err := s.sendTx(n, project, in)
			if err != nil {
				return nil, fmt.Errorf("events[%d]: %w", i, err)
			}
			// Workflows added since fanOut counted may start more: the limit holds.
			if runs += len(r.Runs); runs > s.cfg.MaxRunsPerRequest {
				return nil, s.tooManyRuns(runs)
			}
			out[i] = r
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range out {
		if r.ScheduledFor != 0 {
			s.wake() // its timer may be the earliest
			return out, nil
		}
		for _, run := range r.Runs {
			if run.Debounced || run.Batched {
				s.wake() // a buffer's deadline may now be the earliest
				return out, nil
			}
		}
	}
	return out, nil
}

// sendTx handles one event inside the transaction.
func (s *Service) sendTx(n *delivery.NativeTx, project string, in EventIn) (EventResult, error) {
	tx, now := n.Tx, n.Now
	if in.DedupeID != "" {
		rec, err := tx.EventDedup(project, in.DedupeID)
		switch {
		case err == nil && rec.ExpiresAt > now.UnixMilli():
			return EventResult{ID: rec.MessageID, Deduped: true, Runs: []EventRun{}}, nil
		case err != nil && !errors.Is(err, storage.ErrNotFound):
			return EventResult{}, err
		}
	}
	ev := Event{ID: s.ids.New(storage.PrefixEvent, now), Name: in.Name, Data: in.Data, DedupeID: in.DedupeID, Ts: now.UnixMilli(), Runs: []EventRun{}}
	if in.DedupeID != "" {
		exp := now.Add(s.cfg.EventDedupWindow).UnixMilli()
		if err := tx.PutEventDedup(project, in.DedupeID, &storage.DedupRecord{MessageID: ev.ID, ExpiresAt: exp}); err != nil {
			return EventResult{}, err
		}
	}
	if at, delayed := scheduledFor(in, now); delayed {
		ev.Ts, ev.ScheduledFor, ev.Pending = at, at, true
		if err := tx.PutDelayedEvent(project, &ev); err != nil {
			return EventResult{}, err
		}
		return EventResult{ID: ev.ID, ScheduledFor: at, Runs: ev.Runs}, nil
	}
	if err := s.fanOutTx(n, project, &ev); err != nil {
		return EventResult{}, err
	}
	return EventResult{ID: ev.ID, Runs: ev.Runs, Cancelled: ev.Cancelled}, nil
}

// fanOutTx passes ev to every workflow its name triggers, wakes its waiters and stores
// it with what each workflow did.
func (s *Service) fanOutTx(n *delivery.NativeTx, project string, ev *Event) error {
	defs, err := n.Tx.TriggeredBy(project, ev.Name)
	if err != nil {
		return err
	}
	pe := payloadEvent{ID: ev.ID, Name: ev.Name, Data: ev.Data, Ts: ev.Ts}
	// Cancels first: a run this event starts is not one it cancels.
	if ev.Cancelled, err = s.cancelTx(n, project, pe); err != nil {
		return err
	}
	ke := newKeyEvent(pe)
	for i := range defs {
		d := &defs[i]
		r, err := s.routeTx(n, project, d, pe, ke)
		if err != nil {
			return fmt.Errorf("workflow %q: %w", d.Name, err)
		}
		ev.Runs = append(ev.Runs, r)
	}
	if _, err := n.NotifyEvent(project, delivery.IncomingEvent{ID: ev.ID, Name: ev.Name, Data: ev.Data, Ts: ev.Ts}); err != nil {
		return err
	}
	return n.Tx.PutEvent(project, ev)
}

// routeTx passes one event to one workflow: its gates, then a buffer or a new run. ke
// evaluates the gates' keys over pe (one per event, shared by its workflows).
func (s *Service) routeTx(n *delivery.NativeTx, project string, d *Workflow, pe payloadEvent, ke *keyEvent) (EventRun, error) {
	v, err := admit(n.Tx, project, d, func(key string) string { return s.keyValue(ke, key) }, n.Now)
	if err != nil {
		return EventRun{}, err
	}
	switch {
	case v.deduped:
		return EventRun{Workflow: d.Name, Deduped: true}, nil
	case v.dropped:
		return EventRun{Workflow: d.Name, Dropped: true}, nil
	}
	if err := v.commit(n.Tx, project); err != nil {
		return EventRun{}, err
	}
	r, held, err := s.bufferTx(n, project, d, pe)
	if err != nil || held {
		return r, err
	}
	return s.startTx(n, project, d, []payloadEvent{pe})
}

// payload is a run's initial payload (docs/protocol.md, "Controls": the run's first
// delivery carries it): the first event at the top level and every event in events
// (receive order).
type payload struct {
	payloadEvent
	Events []payloadEvent `json:"events"`
}

// runPublication builds the message that creates a run of d for events: what the official
// SDK's trigger would publish (the Upstash-Workflow-Sdk-Version forwarded on the first
// delivery, a failure callback to the workflow URL), plus Duraton-Workflow and
// Duraton-App on every delivery.
func runPublication(project string, d *Workflow, events []payloadEvent, runID string, keyOf func(key string) string) (delivery.Publication, error) {
	body, err := wire.CompactJSON(payload{payloadEvent: events[0], Events: events})
	if err != nil {
		return delivery.Publication{}, fmt.Errorf("event payload: %w", err)
	}
	own := map[string][]string{
		wire.HeaderDuratonWorkflow: {d.Name},
		wire.HeaderDuratonApp:      {d.App},
	}
	header := map[string][]string{
		wire.HeaderContentType:        {"application/json"},
		wire.HeaderWorkflowSdkVersion: {wire.SdkVersion},
	}
	for k, v := range own {
		header[k] = v
	}
	failureHeader := map[string][]string{
		wire.PrefixWorkflow + "Is-Failure": {"true"},
		wire.HeaderWorkflowFailureCallback: {"true"},
	}
	for k, v := range own {
		failureHeader[k] = v
	}
	m := &delivery.Message{
		Project: project, URL: d.URL, Method: http.MethodPost, Header: header, Body: body,
		Retries: d.Retries, RunID: runID,
		FailureCallback: &delivery.CallbackSpec{
			URL: d.URL, Method: http.MethodPost, Header: failureHeader, Retries: d.Retries,
			RunID: runID, CallType: delivery.CallFailure,
		},
	}
	init := &delivery.RunInit{URL: d.URL, DetectTrigger: true}
	for i, c := range d.FlowControl.Concurrency {
		// Every delivery of the run holds a slot of each scope's key (a flow-control key
		// with the limit as its parallelism), so at most limit of them are in flight per
		// scope. The first scope is the run's waitlist; a second is a further key whose
		// slot the scheduler admits together with the first's.
		value := keyOf(c.Key)
		key := concurrencyKey(d.Name, i, value)
		if c.Scope == flowctl.ScopeApp {
			key = appConcurrencyKey(d.App, c, value)
		}
		fc := flowctl.Config{Key: key, Parallelism: c.Limit, Period: flowctl.DefaultPeriod}
		if i == 0 {
			m.FlowControl = &fc
		} else {
			m.FlowExtra = append(m.FlowExtra, fc)
		}
	}
	if g := d.FlowControl.Throttle; g != nil {
		// The run's first delivery passes the throttle's gate when the scheduler admits
		// it, together with the concurrency slots: a start held back by concurrency
		// spends nothing. A run without concurrency waits in a waitlist of its own
		// scope, with no limit but the gate, so it holds up no one else.
		value := keyOf(g.Key)
		m.StartGate = throttleGate(gateKey(d.Name, gateThrottle, value), g)
		if m.FlowControl == nil {
			m.FlowControl = &flowctl.Config{Key: throttleKey(d.Name, value), Period: flowctl.DefaultPeriod}
		}
	}
	if tt := d.FlowControl.TokenThrottle; tt != nil {
		// The run's first delivery waits while the scope's AI token bucket is empty
		// (delivery/internal/sched/tokengate.go); its AI steps are debited from the bucket.
		value := keyOf(tt.Key)
		m.TokenGate = &storage.TokenGate{Key: gateKey(d.Name, gateTokens, value), Tokens: tt.Tokens, PerMs: tt.PerMs, Estimate: tt.Estimate}
		if m.FlowControl == nil {
			// A waitlist of the scope for the first delivery only: the run's later
			// deliveries do not queue behind other runs' starts waiting for tokens.
			m.FlowControl = &flowctl.Config{Key: flowKeyOf(d.Name, value+"\x00tokens"), Period: flowctl.DefaultPeriod}
			init.StartKeyOnly = true
		}
	}
	init.Cap = d.FlowControl.Cap // checked before each AI step (delivery/ai.go)
	return delivery.Publication{Message: m, Init: init}, nil
}

// concurrencyKey is the flow-control key of a workflow's concurrency scope: readable,
// and exact through the hash of the workflow's name and the scope's key value.
// The second scope's key (scope 1) is told apart by a "c1" in the hash.
func concurrencyKey(workflow string, scope int, value string) string {
	salt := ""
	if scope > 0 {
		salt = "\x00c" + strconv.Itoa(scope)
	}
	return flowKeyOf(workflow, value+salt)
}

// appConcurrencyKey is the flow-control key of an app-scope concurrency limit: the same
// for every workflow of the app that declares the same key text and limit, so their runs
// share the limit.
func appConcurrencyKey(app string, c flowctl.Concurrency, value string) string {
	sum := sha256.Sum256([]byte(app + "\x00" + c.Key + "\x00" + strconv.Itoa(c.Limit) + "\x00" + value))
	return "app." + strings.ReplaceAll(app, ":", "_") + "." + hex.EncodeToString(sum[:8])
}

// throttleGate is the start gate of a throttle. The gate is a GCRA of limit per period:
// emission interval T = period/limit, burst tolerance (limit−1)·T. A burst B below the
// limit keeps T and makes the tolerance (B−1)·T, which is the same machine as a gate of
// B per B·T: that is the gate stored (B·T rounded up to the millisecond, so the pace is
// never faster than limit per period).
func throttleGate(key string, g *flowctl.GCRALimit) *storage.StartGate {
	b := g.BurstOrLimit()
	if b == g.Limit {
		return &storage.StartGate{Key: key, Limit: g.Limit, PerMs: g.PerMs}
	}
	perMs := (g.PerMs*int64(b) + int64(g.Limit) - 1) / int64(g.Limit)
	return &storage.StartGate{Key: key, Limit: b, PerMs: perMs}
}

// throttleKey is the waitlist of a throttled workflow without concurrency.
func throttleKey(workflow, value string) string { return flowKeyOf(workflow, value+"\x00throttle") }

func flowKeyOf(workflow, scope string) string {
	sum := sha256.Sum256([]byte(workflow + "\x00" + scope))
	return "wf." + strings.ReplaceAll(workflow, ":", "_") + "." + hex.EncodeToString(sum[:8])
}

// runIDPrefix starts a native run's id, as the official SDKs start theirs. The rest is
// time-ordered (storage.IDGen): a run's records then go to the end of their buckets
// instead of to a random page each, which a commit of many new runs would all dirty.
const runIDPrefix = "wfr_"

// Events lists recent events newest first (name filters when set), limit per page, from
// the cursor of the previous page; it returns the next page's cursor ("" at the end).
func (s *Service) Events(ctx context.Context, project, name, cursor string, limit int) ([]Event, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var (
		out  []Event
		next string
	)
	err := s.store.View(func(tx *storage.Tx) error {
		var err error
		out, next, err = tx.Events(project, name, cursor, limit, 10*limit)
		return err
	})
	return out, next, err
}

// Event reads one event with what each workflow did with it.
func (s *Service) Event(ctx context.Context, project, id string) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *Event
	err := s.store.View(func(tx *storage.Tx) error {
		e, err := tx.Event(project, id)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("event %q: %w", id, ErrNotFound)
		}
		out = e
		return err
	})
	return out, err
}
