package sdk

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/duraton/duraton/sdk/wire"
)

// InvokeRequest starts another workflow as a child run and waits for its end.
type InvokeRequest struct {
	URL         string // the child workflow's URL
	Body        []byte
	Header      http.Header
	Retries     *int
	FlowControl *FlowControl // the child's own; nothing is inherited
	RunID       string       // default: generated
}

// InvokeResult is how the child ended.
type InvokeResult struct {
	Body       []byte
	IsFailed   bool
	IsCanceled bool
}

type invokeOut struct {
	Body       *string `json:"body"`
	IsFailed   bool    `json:"isFailed"`
	IsCanceled bool    `json:"isCanceled"`
}

// Invoke runs another workflow and returns its result (the run holds nothing meanwhile).
func (c *Context) Invoke(name string, req InvokeRequest) (InvokeResult, error) {
	id := c.take()
	if s, ok, err := c.recorded(id, name, "Invoke"); err != nil {
		return InvokeResult{}, err
	} else if ok {
		o, err := decodeOut[invokeOut](s)
		r := InvokeResult{IsFailed: o.IsFailed, IsCanceled: o.IsCanceled}
		if o.Body != nil {
			r.Body = []byte(*o.Body)
		}
		return r, err
	}
	depth, _ := strconv.Atoi(c.r.Header.Get(wire.HeaderWorkflowInvokeCount))
	childID := req.RunID
	if childID == "" {
		childID = newRunID()
	} else if !strings.HasPrefix(childID, "wfr_") {
		childID = "wfr_" + childID
	}
	resume := map[string][]string{}
	for k, v := range c.stepHeaders() {
		resume[k] = []string{v}
	}
	envelope, err := json.Marshal(map[string]any{
		"body": string(req.Body), "headers": resume, "workflowRunId": c.RunID,
		"workflowRunCreatedAt": c.RunCreatedAt.UnixMilli(), "workflowUrl": c.URL,
		"step": stepObject(id, name, "Invoke", nil, 1),
	})
	if err != nil {
		return InvokeResult{}, err
	}
	h := http.Header{}
	set := func(k, v string) { h.Set(k, v) }
	// onFailure names a header of the failure callback: "Upstash-Failure-Callback-" + the
	// name without its "Upstash-".
	onFailure := func(name string) string { return wire.PrefixFailureCallback + strings.TrimPrefix(name, "Upstash-") }
	set(wire.HeaderWorkflowInit, "true")
	set(wire.HeaderWorkflowRunID, childID)
	set(wire.HeaderWorkflowURL, req.URL)
	set(wire.HeaderWorkflowInvoke, "true")
	set(wire.HeaderWorkflowSdkVersion, wire.SdkVersion)
	set(wire.PrefixForward+wire.HeaderWorkflowSdkVersion, wire.SdkVersion)
	set(wire.PrefixForward+wire.HeaderWorkflowInvokeCount, strconv.Itoa(depth+1))
	set(wire.HeaderFeatureSet, wire.FeatureSet)
	set(wire.HeaderFailureCallback, req.URL)
	set(wire.PrefixFailureCallback+"Forward-"+wire.PrefixWorkflow+"Is-Failure", "true")
	set(wire.PrefixFailureCallback+"Forward-"+wire.HeaderWorkflowFailureCallback, "true")
	set(onFailure(wire.HeaderWorkflowRunID), childID)
	set(onFailure(wire.HeaderWorkflowInit), "false")
	set(onFailure(wire.HeaderWorkflowURL), req.URL)
	set(onFailure(wire.HeaderWorkflowCallType), wire.CallTypeFailure)
	set(wire.HeaderContentType, "application/json")
	if req.Retries != nil {
		set(wire.HeaderRetries, strconv.Itoa(*req.Retries))
		set(onFailure(wire.HeaderRetries), strconv.Itoa(*req.Retries))
	}
	if fc := req.FlowControl; fc != nil {
		set(wire.HeaderFlowControlKey, fc.Key)
		set(wire.HeaderFlowControlValue, fc.value())
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			h.Add(wire.PrefixForward+k, v)
		}
	}
	if err := c.h.client.do(c.requestContext(), http.MethodPost, "/v2/publish/"+req.URL, nil, h, envelope, nil); err != nil {
		panic(stepFailed{err})
	}
	panic(stepDone{condition: "success"})
}
