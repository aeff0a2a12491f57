package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/duraton/duraton/sdk"
)

// fakeNative stands in for a Duraton server's native API so the example runs
// hermetically: it echoes a registration and answers each event with the outcome a
// real server gives a workflow with a rateLimit of 1 (the first starts a run, the
// next is dropped).
func fakeNative() *httptest.Server {
	sent := 0
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "PUT /apps/accounts":
			var in struct{ Workflows []map[string]any }
			_ = json.NewDecoder(r.Body).Decode(&in)
			for _, wf := range in.Workflows {
				wf["app"] = "accounts"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "accounts", "workflows": in.Workflows})
		case "POST /events":
			sent++
			if sent == 1 {
				_, _ = io.WriteString(w, `{"events":[{"id":"evt_1","runs":[{"workflow":"welcome","runId":"wfr_1"}]}]}`)
			} else {
				_, _ = io.WriteString(w, `{"events":[{"id":"evt_2","runs":[{"workflow":"welcome","dropped":true}]}]}`)
			}
		default:
			http.NotFound(w, r)
		}
	}))
}

func ExampleClient_RegisterApp() {
	srv := fakeNative() // in real code: NewClient() reads QSTASH_URL and QSTASH_TOKEN
	defer srv.Close()
	client, err := sdk.NewClient(sdk.WithBaseURL(srv.URL), sdk.WithToken("dev-token"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	app, err := client.RegisterApp(ctx, "accounts", []sdk.Workflow{{
		Name:     "welcome",
		URL:      "https://accounts.example.com/workflows/welcome",
		Triggers: []string{"user.created"},
		Controls: sdk.Controls{RateLimit: &sdk.Rate{Limit: 1, PerMs: 60_000, Key: "user"}},
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(app.Workflows[0].App, app.Workflows[0].Name, app.Workflows[0].TriggerEvents())

	for range 2 {
		res, err := client.SendEvent(ctx, sdk.Event{Name: "user.created", Data: map[string]string{"user": "ann"}})
		if err != nil {
			panic(err)
		}
		run, _ := res.Run("welcome")
		fmt.Println(res.ID, run.Started(), run.RunID, run.Dropped)
	}
	// Output:
	// accounts welcome [user.created]
	// evt_1 true wfr_1 false
	// evt_2 false  true
}

// A native run's route reads the event that started it with Context.Event.
func ExampleContext_Event() {
	route := func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(fmt.Errorf("run %s was not started by an event", c.RunID))
		}
		var user struct{ User string }
		if err := ev.Decode(&user); err != nil {
			return nil, err
		}
		return sdk.Run(c, "greet", func() (string, error) { return "welcome " + user.User, nil })
	}
	http.Handle("/workflows/welcome", sdk.Serve(route))
}
