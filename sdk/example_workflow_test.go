package sdk_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk"
)

// The examples run against a real in-process Duraton (server/servertest) and serve
// their workflows on a local HTTP server: harness (serve_test.go) wires the two.
// In an application, mount sdk.Serve(route) on your own mux; it reads QSTASH_URL,
// QSTASH_TOKEN and the signing keys from the environment.

// startExample starts Duraton and a workflow server for an example.
func startExample() *harness {
	h, err := newHarness()
	if err != nil {
		panic(err)
	}
	return h
}

// mustEnd triggers req and waits for the run's end.
func mustEnd(h *harness, req sdk.TriggerRequest) sdk.RunLog {
	run, err := h.Run(req)
	if err != nil {
		panic(err)
	}
	return run
}

// A three-step workflow: each step's result is recorded, so every step function runs
// once although the route runs once per delivery.
func ExampleServe() {
	h := startExample()
	defer h.Close()

	route := func(c *sdk.Context) (any, error) {
		var order struct {
			ID    int `json:"id"`
			Items int `json:"items"`
		}
		if err := c.DecodePayload(&order); err != nil {
			return nil, sdk.NonRetryable(err) // a bad payload will not get better
		}
		price, err := sdk.Run(c, "price", func() (int, error) { return order.Items * 250, nil })
		if err != nil {
			return nil, err
		}
		invoice, err := sdk.Run(c, "invoice", func() (string, error) { return fmt.Sprintf("INV-%d", order.ID), nil })
		if err != nil {
			return nil, err
		}
		status, err := sdk.Run(c, "notify", func() (string, error) {
			return fmt.Sprintf("%s: %d cents", invoice, price), nil
		})
		if err != nil {
			return nil, err
		}
		return status, nil
	}
	url := h.Mount("/order", route) // http.Handle("/order", sdk.Serve(route))

	run := mustEnd(h, sdk.TriggerRequest{URL: url, BodyJSON: map[string]int{"id": 7, "items": 3}})
	fmt.Println(run.State)
	fmt.Println(*run.Response)
	// Output:
	// RUN_SUCCESS
	// "INV-7: 750 cents"
}

// Triggering a run with the Client, and what its deliveries see.
func ExampleClient_Trigger_workflow() {
	h := startExample()
	defer h.Close()

	url := h.Mount("/signup", func(c *sdk.Context) (any, error) {
		var user struct{ Name string }
		if err := c.DecodePayload(&user); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		return sdk.Run(c, "welcome", func() (string, error) {
			return fmt.Sprintf("welcome %s (labels %v, plan %s)", user.Name, c.Labels, c.Headers.Get("X-Plan")), nil
		})
	})

	client, err := sdk.NewClient(sdk.WithEnv(h.srv.Env())) // in real code: sdk.NewClient()
	if err != nil {
		panic(err)
	}
	res, err := client.Trigger(context.Background(), sdk.TriggerRequest{
		URL:      url,
		BodyJSON: map[string]string{"name": "ada"},
		Labels:   []string{"signup"},
		Headers:  http.Header{"X-Plan": {"pro"}},
	})
	if err != nil {
		panic(err)
	}
	run, err := h.Wait(res.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(res.RunID, sdk.RunIDPrefix), run.State, *run.Response)
	// Output: true RUN_SUCCESS "welcome ada (labels [signup], plan pro)"
}

// Parallel steps: each branch runs once, in a delivery of its own, and the results
// come back in the order of the branches.
func ExampleContext_Parallel() {
	h := startExample()
	defer h.Close()

	url := h.Mount("/quotes", func(c *sdk.Context) (any, error) {
		fast := sdk.Go("fast-carrier", func() (int, error) { return 1200, nil })
		cheap := sdk.Go("cheap-carrier", func() (int, error) { return 700, nil })
		name := sdk.Go("carrier-names", func() ([]string, error) { return []string{"fast", "cheap"}, nil })
		if err := c.Parallel(fast, cheap, name); err != nil {
			return nil, err
		}
		return sdk.Run(c, "pick", func() (string, error) {
			if cheap.Result() < fast.Result() {
				return name.Result()[1], nil
			}
			return name.Result()[0], nil
		})
	})
	run := mustEnd(h, sdk.TriggerRequest{URL: url})
	fmt.Println(run.State, *run.Response)
	// Output: RUN_SUCCESS "cheap"
}

// Call has Duraton make the HTTP request, with its own retries; the run holds nothing
// while it is under way. Any status comes back to the workflow.
func ExampleContext_Call() {
	h := startExample()
	defer h.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/rates/EUR" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"USD":1.08}`)
	}))
	defer api.Close()

	url := h.Mount("/convert", func(c *sdk.Context) (any, error) {
		rate, err := c.Call("rate", sdk.CallRequest{URL: api.URL + "/rates/EUR", Method: http.MethodGet, Retries: 2})
		if err != nil {
			return nil, err
		}
		missing, err := c.Call("missing", sdk.CallRequest{URL: api.URL + "/rates/XXX", Method: http.MethodGet})
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("%d %s, then %d", rate.Status, rate.Body, missing.Status), nil
	})
	run := mustEnd(h, sdk.TriggerRequest{URL: url})
	fmt.Println(*run.Response)
	// Output: "200 {\"USD\":1.08}, then 404"
}

// Invoke runs another workflow as a child run and returns how it ended.
func ExampleContext_Invoke() {
	h := startExample()
	defer h.Close()

	resize := h.Mount("/resize", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "resize", func() (string, error) { return "thumb-" + string(c.Payload()), nil })
	})
	broken := h.Mount("/broken", func(c *sdk.Context) (any, error) {
		return nil, sdk.NonRetryable(fmt.Errorf("unsupported format"))
	})
	url := h.Mount("/upload", func(c *sdk.Context) (any, error) {
		ok, err := c.Invoke("resize", sdk.InvokeRequest{URL: resize, Body: []byte("cat.png")})
		if err != nil {
			return nil, err
		}
		bad, err := c.Invoke("convert", sdk.InvokeRequest{URL: broken})
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("resize: %s failed=%v; convert: failed=%v", ok.Body, ok.IsFailed, bad.IsFailed), nil
	})
	run := mustEnd(h, sdk.TriggerRequest{URL: url})
	fmt.Println(*run.Response)
	// Output: "resize: \"thumb-cat.png\" failed=false; convert: failed=true"
}

// WaitForEvent suspends the run until Client.Notify delivers the event (or the timeout
// passes, reported as Timeout).
func ExampleContext_WaitForEvent() {
	h := startExample()
	defer h.Close()

	url := h.Mount("/approval", func(c *sdk.Context) (any, error) {
		res, err := c.WaitForEvent("approved", "expense-42", time.Hour)
		if err != nil {
			return nil, err
		}
		if res.Timeout {
			return "no answer", nil
		}
		return "decision: " + string(res.Data), nil
	})
	client, err := sdk.NewClient(sdk.WithEnv(h.srv.Env()))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, err := client.Trigger(ctx, sdk.TriggerRequest{URL: url})
	if err != nil {
		panic(err)
	}
	// Notify resumes the runs waiting at that moment; wait until ours is.
	for deadline := time.Now().Add(waitFor); ; {
		resumed, err := client.Notify(ctx, "expense-42", []byte("approved by bob"))
		if err != nil {
			panic(err)
		}
		if len(resumed) > 0 {
			break
		}
		if time.Now().After(deadline) {
			panic("the run never waited")
		}
		time.Sleep(pollEvery)
	}
	run, err := h.Wait(res.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(*run.Response)
	// Output: "decision: approved by bob"
}

// A step with its own flow control is admitted under its key only: here at most one
// delivery at a time calls the vendor, whatever the run's own limits.
func ExampleWithStepFlowControl() {
	h := startExample()
	defer h.Close()

	key := func(c *sdk.Context) string {
		if fc := c.FlowControl(); fc != nil {
			return fmt.Sprintf("%s/%d", fc.Key, fc.Parallelism)
		}
		return "none"
	}
	url := h.Mount("/sync", func(c *sdk.Context) (any, error) {
		prepared, err := sdk.Run(c, "prepare", func() (string, error) { return key(c), nil })
		if err != nil {
			return nil, err
		}
		vendor, err := sdk.Run(c, "call-vendor", func() (string, error) { return key(c), nil },
			sdk.WithStepFlowControl(sdk.FlowControl{Key: "vendor-api", Parallelism: 1}))
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("prepare under %s, call-vendor under %s", prepared, vendor), nil
	})
	run := mustEnd(h, sdk.TriggerRequest{URL: url, FlowControl: &sdk.FlowControl{Key: "sync-runs", Parallelism: 10}})
	fmt.Println(*run.Response)
	// Output: "prepare under sync-runs/10, call-vendor under vendor-api/1"
}
