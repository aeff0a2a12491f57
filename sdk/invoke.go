package sdk

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
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
	depth, _ := strconv.Atoi(c.r.Header.Get("Upstash-Workflow-Invoke-Count"))
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
	set("Upstash-Workflow-Init", "true")
	set("Upstash-Workflow-Runid", childID)
	set("Upstash-Workflow-Url", req.URL)
	set("Upstash-Workflow-Invoke", "true")
	set("Upstash-Workflow-Sdk-Version", "1")
	set("Upstash-Forward-Upstash-Workflow-Sdk-Version", "1")
	set("Upstash-Forward-Upstash-Workflow-Invoke-Count", strconv.Itoa(depth+1))
	set("Upstash-Feature-Set", featureSet)
	set("Upstash-Failure-Callback", req.URL)
	set("Upstash-Failure-Callback-Forward-Upstash-Workflow-Is-Failure", "true")
	set("Upstash-Failure-Callback-Forward-Upstash-Workflow-Failure-Callback", "true")
	set("Upstash-Failure-Callback-Workflow-Runid", childID)
	set("Upstash-Failure-Callback-Workflow-Init", "false")
	set("Upstash-Failure-Callback-Workflow-Url", req.URL)
	set("Upstash-Failure-Callback-Workflow-Calltype", "failureCall")
	set("Content-Type", "application/json")
	if req.Retries != nil {
		set("Upstash-Retries", strconv.Itoa(*req.Retries))
		set("Upstash-Failure-Callback-Retries", strconv.Itoa(*req.Retries))
	}
	if fc := req.FlowControl; fc != nil {
		set("Upstash-Flow-Control-Key", fc.Key)
		set("Upstash-Flow-Control-Value", fc.value())
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			h.Add("Upstash-Forward-"+k, v)
		}
	}
	if err := c.h.client.do(c.requestContext(), http.MethodPost, "/v2/publish/"+req.URL, nil, h, envelope, nil); err != nil {
		panic(stepFailed{err})
	}
	panic(stepDone{condition: "success"})
}
