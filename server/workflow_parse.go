package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// Workflow publish headers (docs/protocol.md, "Steps") beyond wire's: the run of a callback.
const (
	hCallbackRunID = wire.PrefixCallback + "Workflow-Runid"
	hFailureRunID  = wire.PrefixFailureCallback + "Workflow-Runid"
	maxRunIDLen    = 256
)

var runIDPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.:]+$`)

// runIDChars is runIDPattern.MatchString for a non-empty id without the regexp engine:
// every step publish checks a run id (TestRunIDCharsMatchesPattern).
func runIDChars(id string) bool {
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

func validRunID(id string) error {
	if id == "" || len(id) > maxRunIDLen || !runIDChars(id) {
		return badRequest("workflow run id %q must match %s and be at most %d bytes", id, runIDPattern, maxRunIDLen)
	}
	return nil
}

// invokeEnvelope is the body of a context.invoke publish (docs/protocol.md, "Steps").
type invokeEnvelope struct {
	Body                 string              `json:"body"`
	Headers              map[string][]string `json:"headers"`
	WorkflowRunID        string              `json:"workflowRunId"`
	WorkflowRunCreatedAt int64               `json:"workflowRunCreatedAt"`
	WorkflowURL          string              `json:"workflowUrl"`
	Step                 json.RawMessage     `json:"step"`
}

// workflow reads the workflow headers of a parsed message. It binds m to its run and
// returns the run's creation details for an Init message. For an invoke it unwraps the
// envelope: the child's payload replaces m.Body.
func (p messageParser) workflow(h http.Header, m *delivery.Message) (*delivery.RunInit, error) {
	if cb := h.Get(hCallbackRunID); cb != "" && m.Callback != nil {
		m.Callback.RunID, m.Callback.CallType = cb, delivery.CallFromCallback
	}
	if fc := h.Get(hFailureRunID); fc != "" && m.FailureCallback != nil {
		m.FailureCallback.RunID, m.FailureCallback.CallType = fc, delivery.CallFailure
	}
	runID := h.Get(wire.HeaderWorkflowRunID)
	if runID == "" {
		return nil, nil
	}
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	m.RunID = runID
	m.CallType = h.Get(wire.HeaderWorkflowCallType)
	switch m.CallType {
	case "", delivery.CallStep:
		m.CallType = delivery.CallStep
	case delivery.CallToCallback:
		// Duraton-Ai marks the call an AI step (metered and capped whatever its path).
		switch v := strings.ToLower(h.Get(wire.HeaderAI)); v {
		case "":
		case "openai", "anthropic":
			m.AICall = true
		default:
			return nil, headerError(wire.HeaderAI, "%q is not an AI API shape (want openai or anthropic)", v)
		}
	default:
		return nil, headerError(wire.HeaderWorkflowCallType, "%q cannot be published (want step or toCallback)", m.CallType)
	}
	if !strings.EqualFold(h.Get(wire.HeaderWorkflowInit), "true") {
		return nil, nil
	}
	init := &delivery.RunInit{
		URL:           h.Get(wire.HeaderWorkflowURL),
		DetectTrigger: strings.Contains(h.Get(wire.HeaderFeatureSet), wire.FeatureDetectTrigger),
		TriggerBySDK:  strings.EqualFold(h.Get(wire.HeaderWorkflowTriggerBySDK), "true"),
	}
	if init.URL != "" {
		u, err := p.checkURL(wire.HeaderWorkflowURL, init.URL)
		if err != nil {
			return nil, err
		}
		init.URL = u
	}
	if v := first(m.Header[wire.HeaderWorkflowInvokeCount]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, headerError(wire.PrefixForward+wire.HeaderWorkflowInvokeCount, "want a non-negative integer, got %q", v)
		}
		init.InvokeDepth = n
	}
	if strings.EqualFold(h.Get(wire.HeaderWorkflowInvoke), "true") {
		parent, payload, err := p.invokeParent(m.Body)
		if err != nil {
			return nil, err
		}
		parent.Template.Project, parent.Template.CallerIP = m.Project, m.CallerIP
		init.Parent, m.Body = parent, payload
	}
	return init, nil
}

// invokeParent unwraps an invoke envelope into the child's payload and the link that
// resumes the parent.
func (p messageParser) invokeParent(body []byte) (*delivery.ParentLink, []byte, error) {
	var env invokeEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, nil, badRequest("invoke body must be the SDK's invoke envelope: %v", err)
	}
	if env.WorkflowURL == "" || len(env.Step) == 0 {
		return nil, nil, badRequest("invoke envelope needs workflowUrl and step")
	}
	template, err := p.template(headerFromMap(env.Headers), env.WorkflowURL)
	if err != nil {
		return nil, nil, prefixError("invoke envelope headers", err)
	}
	return &delivery.ParentLink{
		RunID: template.RunID, URL: env.WorkflowURL, CreatedAt: env.WorkflowRunCreatedAt,
		Template: template, Step: env.Step,
	}, []byte(env.Body), nil
}

// template parses publish-style headers (a wait request's, an invoke envelope's, a
// timeout's) into the message that will continue a run.
func (p messageParser) template(h http.Header, url string) (*delivery.Message, error) {
	m, err := p.parse(h, url)
	if err != nil {
		return nil, err
	}
	runID := h.Get(wire.HeaderWorkflowRunID)
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	m.RunID, m.CallType = runID, delivery.CallStep
	return m, nil
}

// headerFromMap builds an http.Header from a JSON header map whose names may come in
// several cases ("Upstash-Workflow-RunId" and "Upstash-Workflow-Runid").
func headerFromMap(in map[string][]string) http.Header {
	h := http.Header{}
	for k, vs := range in {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}
