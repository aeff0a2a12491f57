package server

// Real-HTTP tests of inline answers (wire.HeaderInline): a workflow endpoint answers a
// delivery with its next steps, or with the run's end, and the engine records them with
// the delivery's outcome. The Go SDK answers so by itself; hand-written endpoints answer
// what the SDK never would, to check what the engine refuses.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/sdk/wire"
)

// inlineExchange is one delivery an endpoint got and the inline kind it answered.
type inlineExchange struct {
	Offer string // the delivery's Duraton-Inline
	Kind  string // the answer's Duraton-Inline ("": none)
	Steps string // the answer's Duraton-Inline-Steps
}

// exchanges records what a wrapped endpoint was offered and answered.
type exchanges struct {
	mu  sync.Mutex
	all []inlineExchange
}

// wrap serves h, recording each exchange before its answer leaves (so before Duraton
// records the outcome).
func (x *exchanges) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		x.mu.Lock()
		x.all = append(x.all, inlineExchange{Offer: r.Header.Get(wire.HeaderInline), Kind: rec.Header().Get(wire.HeaderInline),
			Steps: rec.Header().Get(wire.HeaderInlineSteps)})
		x.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (x *exchanges) list() []inlineExchange {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]inlineExchange(nil), x.all...)
}

// apiCounter is a reverse proxy to the API that records the requests going through it:
// the SDK's API calls, when its QSTASH_URL points there.
type apiCounter struct {
	URL  string
	mu   sync.Mutex
	reqs []string // "METHOD /path"
}

func newAPICounter(t *testing.T, env *apiEnv) *apiCounter {
	t.Helper()
	target, err := url.Parse(env.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	transport := &http.Transport{}
	proxy.Transport = transport
	c := &apiCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.reqs = append(c.reqs, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(transport.CloseIdleConnections)
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *apiCounter) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.reqs...)
}

// mountSDKRoute serves route with the Go SDK on 127.0.0.1, its API calls going through
// a counter, and returns its URL, its exchanges and the counter.
func mountSDKRoute(t *testing.T, env *apiEnv, route sdk.RouteFunc, opts ...sdk.ServeOption) (string, *exchanges, *apiCounter) {
	t.Helper()
	api := newAPICounter(t, env)
	vals := map[string]string{"QSTASH_URL": api.URL, "QSTASH_TOKEN": env.Token,
		"QSTASH_CURRENT_SIGNING_KEY": testCurrentKey, "QSTASH_NEXT_SIGNING_KEY": testNextKey}
	x := &exchanges{}
	h := sdk.Serve(route, append([]sdk.ServeOption{sdk.WithServeEnv(func(k string) string { return vals[k] })}, opts...)...)
	app := httptest.NewServer(x.wrap(h))
	t.Cleanup(app.Close)
	return app.URL + "/wf", x, api
}

// runSteps lists a run log's steps as "name=out" (the initial payload as "Initial=out").
func runSteps(t *testing.T, v wire.RunLog) []string {
	t.Helper()
	var out []string
	for _, g := range v.Steps {
		for _, s := range g.Steps {
			name := s.StepName()
			if s.StepType() == "Initial" {
				name = "Initial"
			}
			out = append(out, fmt.Sprintf("%s=%v", name, stepField(t, s, "out")))
		}
	}
	return out
}

// TestInlineSDKWorkflow: a Go SDK workflow of three steps runs to its end with inline
// answers only: no API call, one delivery per step, the last one ending the run with the
// last step's result (Duraton-Inline-Steps). Answered the QStash way (the control), the
// same run takes API calls and one more delivery, and stores the same history.
func TestInlineSDKWorkflow(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	route := func(c *sdk.Context) (any, error) {
		var in struct{ N int }
		if err := c.DecodePayload(&in); err != nil {
			return nil, err
		}
		a, err := sdk.Run(c, "double", func() (int, error) { return in.N * 2, nil })
		if err != nil {
			return nil, err
		}
		b, err := sdk.Run(c, "add", func() (int, error) { return a + 3, nil })
		if err != nil {
			return nil, err
		}
		s, err := sdk.Run(c, "format", func() (string, error) { return fmt.Sprintf("%d/%d/%d", in.N, a, b), nil })
		if err != nil {
			return nil, err
		}
		return map[string]string{"result": s}, nil
	}
	wantSteps := []string{"Initial={\"N\":5}", "double=10", "add=13", "format=\"5/10/13\""}
	offer := strconv.Itoa(16 << 20) // Config.MaxBatchBytes' default

	for _, mode := range []struct {
		name      string
		opts      []sdk.ServeOption
		kinds     []string // Duraton-Inline of each answer
		apiCalls  []string
		lastSteps bool // the last answer carries the last step (Duraton-Inline-Steps)
		messages  int  // messages made: the trigger's and the delivered steps'
	}{
		{name: "inline", kinds: []string{wire.InlineSteps, wire.InlineSteps, wire.InlineEnd}, lastSteps: true, messages: 3},
		{name: "api", opts: []sdk.ServeOption{sdk.WithoutInlineAnswers()}, kinds: []string{"", "", "", ""}, messages: 4,
			apiCalls: []string{"POST /v2/batch", "POST /v2/batch", "POST /v2/batch", "DELETE /v2/workflows/runs/wfr_inline_api"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			runID := "wfr_inline_" + mode.name
			wfURL, x, api := mountSDKRoute(t, env, route, mode.opts...)
			env.trigger(t, runID, wfURL, `{"N":5}`)

			v := env.eventuallyRunState(t, runID, "RUN_SUCCESS")
			require.NotNil(t, v.Response)
			require.JSONEq(t, `{"result":"5/10/13"}`, *v.Response)
			require.Equal(t, wantSteps, runSteps(t, v), "each step recorded once, in order")
			// Inline, the last step is recorded with the run's end: no message delivers it.
			require.Len(t, env.logs(t, "state=CREATED&url="+url.QueryEscape(wfURL)).Events, mode.messages)

			// The QStash way, the run ends (DELETE) before its last delivery is answered.
			eventually(t, "every delivery answered", func() bool { return len(x.list()) >= len(mode.kinds) })
			ex := x.list()
			kinds := make([]string, len(ex))
			for i, e := range ex {
				kinds[i] = e.Kind
				require.Equal(t, offer, e.Offer, "delivery %d offers an inline answer of MaxBatchBytes", i)
			}
			require.Equal(t, mode.kinds, kinds)
			require.Equal(t, mode.lastSteps, ex[len(ex)-1].Steps != "")
			require.Equal(t, mode.apiCalls, api.list(), "the SDK's API calls")
		})
	}
}

// --- hand-written endpoints ---

// scriptedAnswer is what a scripted endpoint answers: kind "" is a plain 200.
type scriptedAnswer struct {
	status int // 0: 200
	kind   string
	header []string // further name/value pairs
	body   []byte
}

// delivered is a delivery a scripted endpoint got.
type delivered struct {
	RunID   string
	Offer   int
	History int
	Retried int
}

// scriptedEndpoint answers each delivery with what script returns for it. Every answer
// carries Upstash-Workflow-Sdk-Version, as an SDK's does (WF_DetectTrigger).
func scriptedEndpoint(t *testing.T, script func(r *http.Request, d delivered) scriptedAnswer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hist []wire.HistoryEntry
		if err := json.NewDecoder(r.Body).Decode(&hist); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d := delivered{RunID: r.Header.Get(wire.HeaderWorkflowRunID), History: len(hist)}
		d.Offer, _ = strconv.Atoi(r.Header.Get(wire.HeaderInline))
		d.Retried, _ = strconv.Atoi(r.Header.Get(wire.HeaderRetried))
		a := script(r, d)
		w.Header().Set(wire.HeaderWorkflowSdkVersion, wire.SdkVersion)
		if a.kind != "" {
			w.Header().Set(wire.HeaderInline, a.kind)
		}
		for i := 0; i+1 < len(a.header); i += 2 {
			w.Header().Set(a.header[i], a.header[i+1])
		}
		w.WriteHeader(max(a.status, http.StatusOK))
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// runStepJSON is the step object of a Run step id named s<id> with result id.
func runStepJSON(id int) string {
	return fmt.Sprintf(`{"stepId":%d,"stepName":"s%d","stepType":"Run","out":"%d","concurrent":1}`, id, id, id)
}

// stepsAnswer is an inline answer of the given batch entries.
func stepsAnswer(entries ...map[string]any) scriptedAnswer {
	raw, _ := json.Marshal(entries) // strings only: it cannot fail
	return scriptedAnswer{kind: wire.InlineSteps, body: raw}
}

// workflowDLQ lists runID's workflow dead letters.
func (e *apiEnv) workflowDLQ(t *testing.T, runID string) []wire.WorkflowDLQMessage {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/workflows/dlq?workflowRunId="+runID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[wire.WorkflowDLQPage](t, r).Messages
}

// TestInlineRefusals: an inline answer Duraton cannot take fails the delivery for good
// (no retry, although the run has the default 3): the run is FAILED, its dead letter
// says why, and no step of the answer is stored.
func TestInlineRefusals(t *testing.T) {
	t.Parallel()
	const offer = 4096
	env := newAPI(t, envOptions{
		config: func(c *Config) { c.MaxBatchBytes = offer },
		engine: func(c *delivery.Config) { c.MaxParallelSteps, c.MaxRunSteps = 2, 2 },
	})
	// Each answers the delivery d of run runID at wfURL.
	type answerFunc func(runID, wfURL string, d delivered) scriptedAnswer
	step1 := func(runID, wfURL string, _ delivered) scriptedAnswer {
		return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(1)))
	}
	tests := []struct {
		name   string
		answer answerFunc
		want   string
		stored []string // the run's steps after the failure
	}{
		{"OtherRun", func(_, wfURL string, _ delivered) scriptedAnswer {
			return stepsAnswer(wfEntry("wfr_someone_else", wfURL, false, runStepJSON(1)))
		}, `is for run "wfr_someone_else"`, nil},
		{"StartsRun", func(runID, wfURL string, _ delivered) scriptedAnswer {
			return stepsAnswer(wfEntry(runID, wfURL, true, runStepJSON(1)))
		}, "starts a run", nil},
		{"InvalidJSON", func(string, string, delivered) scriptedAnswer {
			return scriptedAnswer{kind: wire.InlineSteps, body: []byte(`[{"destination":`)}
		}, "must be a JSON array", nil},
		{"UnknownKind", func(runID, wfURL string, d delivered) scriptedAnswer {
			a := step1(runID, wfURL, d)
			a.kind = "foo"
			return a
		}, `unknown kind "foo"`, nil},
		{"EmptyBatch", func(string, string, delivered) scriptedAnswer {
			return scriptedAnswer{kind: wire.InlineSteps, body: []byte(`[]`)}
		}, "no step messages", nil},
		{"Queue", func(runID, wfURL string, _ delivered) scriptedAnswer {
			e := wfEntry(runID, wfURL, false, runStepJSON(1))
			e["queue"] = "orders"
			return stepsAnswer(e)
		}, "queue", nil},
		{"DedupID", func(runID, wfURL string, _ delivered) scriptedAnswer {
			return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(1), "upstash-deduplication-id", "d1"))
		}, "deduplication id", nil},
		{"MoreThanMaxParallelSteps", func(runID, wfURL string, _ delivered) scriptedAnswer {
			return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(1)), wfEntry(runID, wfURL, false, runStepJSON(2)),
				wfEntry(runID, wfURL, false, runStepJSON(3)))
		}, "3 step messages, the limit is 2", nil},
		{"BiggerThanOffer", func(runID, wfURL string, d delivered) scriptedAnswer {
			// Valid steps, but the step's body alone has more bytes than the offer.
			return stepsAnswer(wfEntry(runID, wfURL, false, strings.Repeat(" ", d.Offer)+runStepJSON(1)))
		}, fmt.Sprintf("exceeds the offered %d bytes", offer), nil},
		{"BadInlineSteps", func(string, string, delivered) scriptedAnswer {
			return scriptedAnswer{kind: wire.InlineEnd, header: []string{wire.HeaderInlineSteps, "999"}, body: []byte(`{"ok":true}`)}
		}, wire.HeaderInlineSteps, nil},
		{"RunLimit", func(runID, wfURL string, d delivered) scriptedAnswer {
			// MaxRunSteps 2: the payload and s1 fill the history; s2 is over the limit,
			// which only the outcome's transaction finds.
			return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(d.History)))
		}, "the limit is 2", []string{"s1"}},
	}
	byPath := map[string]answerFunc{
		// A live run of the project that OtherRun's answer names.
		"/Bystander": func(string, string, delivered) scriptedAnswer { return scriptedAnswer{} },
	}
	for _, tt := range tests {
		byPath["/"+tt.name] = tt.answer
	}
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		return byPath[r.URL.Path](d.RunID, r.Header.Get(wire.HeaderWorkflowURL), d)
	})
	env.trigger(t, "wfr_someone_else", ep.URL+"/Bystander", `"b"`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runID := "wfr_refused_" + strings.ToLower(tt.name)
			env.trigger(t, runID, ep.URL+"/"+tt.name, `"p"`)

			v := env.eventuallyRunState(t, runID, "RUN_FAILED")
			require.Equal(t, append([]string{"Initial"}, tt.stored...), stepNames(v), "no step of the answer is stored")
			last := v.Steps[len(v.Steps)-1]
			require.Equal(t, "next", last.Type, "the failed delivery is the run's next step")
			require.Equal(t, `"STEP_FAILED"`, string(last.Steps[0]["state"]))
			dl := env.workflowDLQ(t, runID)
			require.Len(t, dl, 1)
			require.Equal(t, v.DLQID, dl[0].DLQID)
			require.Contains(t, dl[0].Error, "inline answer refused: ")
			require.Contains(t, dl[0].Error, tt.want)
		})
	}
	t.Cleanup(func() {
		// After the subtests: OtherRun's step reached no other run.
		bystander := env.runLog(t, "wfr_someone_else")
		require.Equal(t, "RUN_STARTED", bystander.State)
		require.Equal(t, []string{"Initial"}, stepNames(bystander))
	})
}

// stepNames lists a run log's step names ("Initial" for the payload).
// stepNames lists a run log's recorded steps (not its "next" group of pending deliveries).
func stepNames(v wire.RunLog) []string {
	var out []string
	for _, g := range v.Steps {
		if g.Type == "next" {
			continue
		}
		for _, s := range g.Steps {
			if s.StepType() == "Initial" {
				out = append(out, "Initial")
			} else {
				out = append(out, s.StepName())
			}
		}
	}
	return out
}

// TestInlineAnswerAfterRunEnded: a run that ended while its delivery was in flight takes
// nothing from the delivery's inline answer: no step is stored or delivered. Cancelled,
// the run drops the delivery; completed (DELETE ?cancel=false, which keeps it), the
// delivery is recorded delivered.
func TestInlineAnswerAfterRunEnded(t *testing.T) {
	t.Parallel()
	for _, end := range []struct {
		cancel, state string
		delivered     int // DELIVERED log events of the in-flight delivery
	}{{"true", "RUN_CANCELED", 0}, {"false", "RUN_SUCCESS", 1}} {
		t.Run("cancel="+end.cancel, func(t *testing.T) {
			t.Parallel()
			testInlineAnswerAfterRunEnded(t, end.cancel, end.state, end.delivered)
		})
	}
}

func testInlineAnswerAfterRunEnded(t *testing.T, cancel, state string, wantDelivered int) {
	env := newAPI(t, envOptions{})
	const runID = "wfr_inline_ended"
	arrived, release := make(chan string, 1), make(chan struct{})
	var deliveries atomic.Int32
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		deliveries.Add(1)
		select { // never blocks: a second delivery would be a failure, counted
		case arrived <- r.Header.Get(wire.HeaderMessageID):
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return stepsAnswer(wfEntry(runID, r.Header.Get(wire.HeaderWorkflowURL), false, runStepJSON(1)))
	})
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	t.Cleanup(stop) // before the endpoint closes, which waits for its handler

	env.trigger(t, runID, ep.URL+"/wf", `"p"`)
	var msgID string
	select {
	case msgID = <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("the run's first delivery did not arrive")
	}
	r := env.call(t, http.MethodDelete, "/v2/workflows/runs/"+runID+"?cancel="+cancel, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, state, env.runLog(t, runID).State)

	stop() // the endpoint answers its step inline now
	eventually(t, "the answered delivery is finished", func() bool { return env.Engine.Stats().InFlight == 0 })
	v := env.runLog(t, runID)
	require.Equal(t, state, v.State)
	require.Equal(t, []string{"Initial"}, stepNames(v), "no step of the answer is stored")
	require.Len(t, env.logs(t, "state=CREATED").Events, 1, "no message but the trigger's was made")
	require.Len(t, env.logs(t, "messageIds="+msgID+"&state=DELIVERED").Events, wantDelivered)
	require.Equal(t, int32(1), deliveries.Load(), "nothing of the answer was delivered")
}

// TestInlineAnswerRepeatsRecordedStep: an inline answer that repeats a step the run
// already recorded is delivered, and the step stays recorded and delivered once. The
// step is published through the API while the delivery that repeats it waits on a
// paused key (so no delivery of the run is in flight and nothing is recorded early).
func TestInlineAnswerRepeatsRecordedStep(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	const runID, key = "wfr_inline_repeat", "inline-repeat-held"
	env.flowAction(t, key, "pause", "")
	var repeated, thirdDeliveries atomic.Int32
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		wfURL := r.Header.Get(wire.HeaderWorkflowURL)
		switch d.History {
		case 1: // s1, whose delivery waits on the paused key
			return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(1),
				"upstash-flow-control-key", key, "upstash-flow-control-value", "parallelism=1"))
		case 2: // s2 again: it was recorded meanwhile
			repeated.Add(1)
			return stepsAnswer(wfEntry(runID, wfURL, false, runStepJSON(2)))
		default:
			thirdDeliveries.Add(1)
			return scriptedAnswer{} // the run waits: nothing more is published
		}
	})
	wfURL := ep.URL + "/wf"
	env.trigger(t, runID, wfURL, `"p"`)
	eventually(t, "s1 is recorded", func() bool { return len(stepNames(env.runLog(t, runID))) == 2 })
	env.step(t, runID, wfURL, runStepJSON(2))
	eventually(t, "s2's delivery answered", func() bool { return thirdDeliveries.Load() == 1 })
	env.flowAction(t, key, "resume", "")
	eventually(t, "the repeating answer is in and every delivery finished", func() bool {
		return repeated.Load() == 1 && env.Engine.Stats().InFlight == 0
	})
	v := env.runLog(t, runID)
	require.Equal(t, "RUN_STARTED", v.State)
	require.Equal(t, []string{"Initial", "s1", "s2"}, stepNames(v), "s2 is recorded once")
	require.Len(t, env.logs(t, "state=CREATED").Events, 3, "messages made: the trigger, s1, and s2 once")
	require.Equal(t, int32(1), thirdDeliveries.Load(), "s2 is delivered once")
}

// publishStep publishes a step entry through /v2/batch as an SDK would (from an
// endpoint's handler: no test assertions).
func publishStep(env *apiEnv, entry map[string]any) error {
	raw, err := json.Marshal([]map[string]any{entry})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, env.URL+"/v2/batch", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+env.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST /v2/batch: %d %s", resp.StatusCode, body)
	}
	return nil
}
