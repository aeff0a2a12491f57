package sdk_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/duraton/duraton/sdk"
)

// An App serves a deployment's native workflows from one handler; RegisterApp sends
// their definitions, and events start runs that read the event with Context.Event.
func ExampleApp() {
	h := startExample() // a real in-process Duraton and a local HTTP server
	defer h.Close()

	greeted := make(chan string, 1)
	welcome := func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(fmt.Errorf("run %s was not started by an event", c.RunID))
		}
		var user struct{ User string }
		if err := ev.Decode(&user); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		return sdk.Run(c, "greet", func() (string, error) {
			greeted <- "welcome " + user.User
			return "done", nil
		})
	}
	// In an application: sdk.NewApp("accounts", "https://accounts.example.com/workflows", ...)
	// and http.Handle("/workflows/", app); the handlers read the signing keys from the
	// environment.
	app, err := sdk.NewApp("accounts", h.app.URL+"/workflows", []sdk.Workflow{{
		Name:      "welcome",
		Triggers:  []string{"user.created"},
		RateLimit: &sdk.Rate{Limit: 1, PerMs: 60_000, Key: "user"},
		Handler:   welcome,
	}}, sdk.WithServeEnv(h.srv.Env()))
	if err != nil {
		panic(err)
	}
	h.mux.Handle("/workflows/", app)

	ctx := context.Background()
	reg, err := h.client.RegisterApp(ctx, app)
	if err != nil {
		panic(err)
	}
	fmt.Println(reg.Workflows[0].App, reg.Workflows[0].Name, reg.Workflows[0].TriggerEvents())

	res, err := h.client.SendEvents(ctx, []sdk.Event{
		{Name: "user.created", Data: map[string]string{"user": "ann"}},
		{Name: "user.created", Data: map[string]string{"user": "ann"}}, // over the rateLimit
	})
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		run, _ := r.Run("welcome")
		fmt.Println(run.Started(), run.Dropped)
	}
	fmt.Println(<-greeted)
	// Output:
	// accounts welcome [user.created]
	// true false
	// false true
	// welcome ann
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
