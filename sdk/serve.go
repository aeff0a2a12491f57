package sdk

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// RouteFunc is a workflow: it calls steps on ctx and returns the run's result, which is
// recorded as the run's response.
type RouteFunc func(ctx *Context) (any, error)

// FailureContext is what a failure function learns about a failed run.
type FailureContext struct {
	RunID        string
	URL          string
	Payload      []byte
	FailStatus   int
	FailResponse string
	FailHeaders  http.Header
	// Err is the failure as an error: a *BudgetError (errors.Is(Err, ErrBudget)) when the
	// run's AI cap stopped an AI step, else nil.
	Err error
}

// ServeOption configures Serve.
type ServeOption func(*serveConfig)

type serveConfig struct {
	env         func(string) string
	baseURL     string
	token       string
	receiver    *Receiver
	noVerify    bool
	failure     func(*FailureContext) (any, error)
	workflowURL string
	maxBody     int64
	anySubject  bool
	replay      *ReplayCache
	noInline    bool
}

// WithServeEnv replaces os.Getenv for DURATON_URL, DURATON_TOKEN (QSTASH_URL and
// QSTASH_TOKEN as fallbacks) and the signing keys.
func WithServeEnv(getenv func(string) string) ServeOption {
	return func(c *serveConfig) { c.env = getenv }
}

// WithServeCredentials sets Duraton's URL and token (default DURATON_URL, else
// QSTASH_URL; DURATON_TOKEN, else QSTASH_TOKEN).
func WithServeCredentials(baseURL, token string) ServeOption {
	return func(c *serveConfig) { c.baseURL, c.token = baseURL, token }
}

// WithReceiver verifies every request with r. By default a Receiver is built when both
// QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY are set.
func WithReceiver(r *Receiver) ServeOption { return func(c *serveConfig) { c.receiver = r } }

// WithoutVerification accepts unsigned requests (local experiments only).
func WithoutVerification() ServeOption { return func(c *serveConfig) { c.noVerify = true } }

// WithFailureFunction runs fn when a run failed for good (retries used up or a
// non-retryable error); its result is reported as the failure function's response.
func WithFailureFunction(fn func(*FailureContext) (any, error)) ServeOption {
	return func(c *serveConfig) { c.failure = fn }
}

// WithWorkflowURL sets the URL the workflow is reachable at, when it differs from what
// the request shows (proxies, tunnels). Signatures must then name this URL.
func WithWorkflowURL(u string) ServeOption { return func(c *serveConfig) { c.workflowURL = u } }

// WithoutSubjectCheck accepts a signature made for any URL. By default the token's sub
// claim must be the URL the request arrived at (the WithWorkflowURL one when set), so a
// delivery captured at one endpoint cannot be replayed at another that shares the
// signing keys. Use it only behind a proxy that rewrites the host or the path in ways
// WithWorkflowURL cannot express.
func WithoutSubjectCheck() ServeOption { return func(c *serveConfig) { c.anySubject = true } }

// WithReplayCache refuses a signature whose jti cache already accepted (see
// ReplayCache). Off by default.
func WithReplayCache(cache *ReplayCache) ServeOption {
	return func(c *serveConfig) { c.replay = cache }
}

// WithoutInlineAnswers answers every delivery the QStash way, with API calls, even when
// Duraton offers an inline answer (inline.go): each step then takes a delivery of its
// own and one more ends the run. For debugging and comparison; it costs a round trip
// and a commit per step.
func WithoutInlineAnswers() ServeOption { return func(c *serveConfig) { c.noInline = true } }

// Serve turns a workflow route into an http.Handler that speaks the Upstash Workflow
// protocol: it verifies each delivery, replays the recorded steps, runs or schedules the
// next one, and reports the run's end.
func Serve(route RouteFunc, opts ...ServeOption) http.Handler {
	cfg := serveConfig{env: os.Getenv, maxBody: 32 << 20}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.baseURL == "" {
		cfg.baseURL = envURL(cfg.env)
	}
	if cfg.token == "" {
		cfg.token = envToken(cfg.env)
	}
	if cfg.receiver == nil && !cfg.noVerify {
		cur, next := cfg.env("QSTASH_CURRENT_SIGNING_KEY"), cfg.env("QSTASH_NEXT_SIGNING_KEY")
		if cur != "" && next != "" {
			cfg.receiver = &Receiver{CurrentSigningKey: cur, NextSigningKey: next}
		}
	}
	if cfg.noVerify {
		cfg.receiver = nil
	}
	client, err := NewClient(WithBaseURL(cfg.baseURL), WithToken(cfg.token))
	return &handler{route: route, cfg: cfg, client: client, clientErr: err}
}

type handler struct {
	route     RouteFunc
	cfg       serveConfig
	client    *Client
	clientErr error
}

// stepDone stops a route once the delivery's work is done (a step ran or was scheduled).
// It travels as a panic so that a route that ignores a step's error cannot go on.
type stepDone struct{ condition string }

// finish is the answer of a delivery that did what it should.
type finish struct {
	WorkflowRunID   string `json:"workflowRunId"`
	FinishCondition string `json:"finishCondition"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(wire.HeaderWorkflowSdkVersion, wire.SdkVersion)
	if h.clientErr != nil {
		h.fail(w, http.StatusInternalServerError, h.clientErr)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.maxBody))
	if err != nil {
		h.fail(w, http.StatusInternalServerError, err)
		return
	}
	if h.cfg.receiver != nil {
		if err := h.verify(r, body); err != nil {
			h.fail(w, http.StatusInternalServerError, fmt.Errorf("failed to verify that the workflow request comes from Duraton/QStash: %w", err))
			return
		}
	}
	c := &Context{h: h, r: r, URL: h.workflowURL(r)}
	c.readDeliveryHeaders(r.Header)
	if h.cfg.noInline {
		c.inlineMax = 0
	}
	switch {
	case r.Header.Get(wire.HeaderWorkflowFailureCallback) == "true":
		h.serveFailure(w, c, body)
	case r.Header.Get(wire.HeaderWorkflowCallback) == "true":
		h.serveCallback(w, c, body)
	case r.Header.Get(wire.HeaderWorkflowSdkVersion) == "":
		h.selfTrigger(w, r, c, body)
	case r.Header.Get(wire.HeaderWorkflowSdkVersion) != wire.SdkVersion:
		h.fail(w, http.StatusInternalServerError, errors.New("incompatible workflow sdk protocol version"))
	default:
		h.serveStep(w, c, body)
	}
}

// verify checks the signature, then that it was made for this URL and, with a replay
// cache, that it is not a replay.
func (h *handler) verify(r *http.Request, body []byte) error {
	// One parse of the token: the claims come back from the verification.
	claims, err := h.cfg.receiver.verifyClaims(r.Header.Get(wire.HeaderSignature), body, "")
	if err != nil {
		return err
	}
	sub, jti, exp := claims.Subject, claims.ID, claims.ExpiresAt
	if !h.cfg.anySubject {
		want := h.cfg.workflowURL
		if want == "" {
			want = requestURL(r)
		}
		if !sameURL(sub, want) {
			return fmt.Errorf("%w: signed for %q, received at %q (behind a rewriting proxy: WithWorkflowURL or WithoutSubjectCheck)", wire.ErrSubjectMismatch, sub, want)
		}
	}
	if h.cfg.replay != nil && (jti == "" || !h.cfg.replay.accept(jti, exp, h.cfg.receiver.clock())) {
		return ErrReplayed
	}
	return nil
}

// requestURL is the URL r arrived at, as the client addressed it.
func requestURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.RequestURI()
}

func (h *handler) workflowURL(r *http.Request) string {
	if h.cfg.workflowURL != "" {
		return h.cfg.workflowURL
	}
	if u := r.Header.Get(wire.HeaderWorkflowURL); u != "" {
		return u
	}
	return requestURL(r)
}

// serveStep runs the route over the delivered history.
func (h *handler) serveStep(w http.ResponseWriter, c *Context, body []byte) {
	if err := c.parseHistory(body); err != nil {
		h.fail(w, http.StatusInternalServerError, err)
		return
	}
	result, done, err := h.runRoute(c)
	if (err != nil || done != nil) && c.deferred != nil {
		// The route went on after a step's result and then failed or stopped: the result
		// is recorded first; the next delivery meets the failure again.
		if perr := c.publishDeferred(); perr != nil {
			h.failRoute(w, perr)
			return
		}
		h.done(w, c, "success")
		return
	}
	switch {
	case err != nil:
		h.failRoute(w, err)
	case done != nil:
		h.done(w, c, done.condition)
	default:
		var payload []byte
		if result != nil {
			if payload, err = json.Marshal(result); err != nil {
				h.fail(w, http.StatusInternalServerError, fmt.Errorf("encode the route's result: %w", err))
				return
			}
		}
		if handled, err := c.endInline(payload); err != nil { // inline.go
			h.failRoute(w, err)
			return
		} else if handled {
			h.done(w, c, "success")
			return
		}
		if err := h.client.do(c.r.Context(), http.MethodDelete, "/v2/workflows/runs/"+c.RunID, url.Values{"cancel": {"false"}}, nil, payload, nil); err != nil {
			h.failRoute(w, err)
			return
		}
		h.ok(w, c.RunID, "success")
	}
}

// runRoute runs the route, turning the stop of a step into done.
func (h *handler) runRoute(c *Context) (result any, done *stepDone, err error) {
	defer func() {
		if p := recover(); p != nil {
			if d, ok := p.(stepDone); ok {
				done = &d
				return
			}
			if e, ok := p.(stepFailed); ok {
				err = e.err
				return
			}
			panic(p)
		}
	}()
	result, err = h.route(c)
	return result, nil, err
}

// stepFailed carries an error of Duraton's API out of a step (it is the delivery's error).
type stepFailed struct{ err error }

// selfTrigger starts a run for a request that did not come from Duraton (a user's
// POST): it publishes the run's trigger and answers at once.
func (h *handler) selfTrigger(w http.ResponseWriter, r *http.Request, c *Context, body []byte) {
	headers := http.Header{}
	for k, v := range r.Header {
		lk := strings.ToLower(k)
		// Accept-Encoding is Go's own transport's business, not the run's.
		if strings.HasPrefix(lk, "upstash-") || strings.HasPrefix(lk, "x-forwarded-") || wire.IsHopByHop(k) || lk == "accept-encoding" || lk == "authorization" {
			continue
		}
		headers[k] = v
	}
	req := TriggerRequest{URL: c.URL, Body: body, Headers: headers, ContentType: r.Header.Get("Content-Type")}
	if r.Header.Get(wire.HeaderWorkflowUnknownSdk) != "" {
		// A run triggered without an SDK (POST /v2/trigger): the body is its history, whose
		// first entry is the payload; the run is adopted under its own id.
		var history []wire.HistoryEntry
		if err := json.Unmarshal(body, &history); err != nil || len(history) == 0 || c.RunID == "" {
			h.fail(w, http.StatusInternalServerError, fmt.Errorf("a delivery with %s needs the run id and a history body", wire.HeaderWorkflowUnknownSdk))
			return
		}
		req.Body, req.RunID, req.adopt = history[0].Body, c.RunID, true
		req.ContentType = ""
	}
	res, err := h.client.Trigger(r.Context(), req)
	if err != nil {
		h.fail(w, http.StatusInternalServerError, err)
		return
	}
	h.ok(w, res.RunID, "success")
}

// serveCallback turns the last attempt of a context.Call into the call's step result.
func (h *handler) serveCallback(w http.ResponseWriter, c *Context, body []byte) {
	var cb wire.CallbackPayload
	if err := json.Unmarshal(body, &cb); err != nil {
		h.fail(w, http.StatusInternalServerError, fmt.Errorf("call callback body: %w", err))
		return
	}
	if (cb.Status < 200 || cb.Status > 299) && cb.MaxRetries > 0 && cb.Retried != cb.MaxRetries {
		h.ok(w, c.RunID, "fromCallback") // an intermediate failed attempt: more will come
		return
	}
	respBody, _ := base64.StdEncoding.DecodeString(cb.Body)
	id, _ := strconv.Atoi(c.r.Header.Get(wire.HeaderWorkflowStepID))
	concurrent, _ := strconv.Atoi(c.r.Header.Get(wire.HeaderWorkflowConcurrent))
	out, _ := json.Marshal(CallResponse{Status: cb.Status, Body: respBody, Header: cb.Header})
	step := stepObject(id, c.r.Header.Get(wire.HeaderWorkflowStepName), "Call", string(out), max(concurrent, 1))
	if err := h.publishSteps(c, []stepMessage{{body: step}}); err != nil {
		h.failRoute(w, err)
		return
	}
	h.done(w, c, "fromCallback")
}

func (h *handler) serveFailure(w http.ResponseWriter, c *Context, body []byte) {
	if h.cfg.failure == nil {
		w.Header().Set(wire.HeaderWorkflowFailureCallbackNotFound, "true")
		h.ok(w, c.RunID, "failure-callback-undefined")
		return
	}
	var p wire.CallbackPayload
	if err := json.Unmarshal(body, &p); err != nil {
		h.fail(w, http.StatusInternalServerError, fmt.Errorf("failure callback body: %w", err))
		return
	}
	failBody, _ := base64.StdEncoding.DecodeString(p.Body)
	payload, _ := base64.StdEncoding.DecodeString(p.SourceBody)
	message := string(failBody)
	var parsed struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(failBody, &parsed) == nil && (parsed.Message != "" || parsed.Error != "") {
		message = parsed.Message
		if message == "" {
			message = parsed.Error
		}
	}
	runID := p.WorkflowRunID
	if runID == "" {
		runID = c.RunID
	}
	result, err := h.cfg.failure(&FailureContext{RunID: runID, URL: p.URL, Payload: payload, FailStatus: p.Status, FailResponse: message, FailHeaders: p.Header,
		Err: budgetErrorOf(p.Status, failBody)})
	if err != nil {
		h.failRoute(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": result})
}

func (h *handler) ok(w http.ResponseWriter, runID, condition string) {
	writeJSON(w, http.StatusOK, finish{WorkflowRunID: runID, FinishCondition: condition})
}

// failRoute answers a route's (or a step's) error: 489 for NonRetryable (and for a
// limit Duraton refused with 412), 429 with Retry-After for RetryAfter, 200 when Duraton
// says the run is over (400), else 500.
func (h *handler) failRoute(w http.ResponseWriter, err error) {
	var nr *nonRetryableError
	var ra *retryAfterError
	var api *APIError
	switch {
	case errors.As(err, &nr):
		w.Header().Set(wire.HeaderNonRetryableError, "true")
		h.fail(w, 489, err)
	case errors.As(err, &ra):
		w.Header().Set(wire.HeaderRetryAfter, strconv.Itoa(int(ra.after.Round(time.Second)/time.Second)))
		h.fail(w, http.StatusTooManyRequests, err)
	case errors.As(err, &api) && api.Status == http.StatusBadRequest:
		h.ok(w, "", "workflow-already-ended")
	case errors.As(err, &api) && api.Status == http.StatusPreconditionFailed:
		w.Header().Set(wire.HeaderNonRetryableError, "true")
		h.fail(w, 489, err)
	default:
		h.fail(w, http.StatusInternalServerError, err)
	}
}

func (h *handler) fail(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": errorName(err), "message": err.Error()})
}

func errorName(err error) string {
	var nr *nonRetryableError
	if errors.As(err, &nr) {
		return "WorkflowNonRetryableError"
	}
	return "Error"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// requestContext is the context of the delivery's request, for API calls of steps.
func (c *Context) requestContext() context.Context { return c.r.Context() }
