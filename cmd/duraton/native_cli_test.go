package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// cliRun runs the binary's command line in-process with env and returns exit code,
// stdout and stderr.
func cliRun(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// TestNativeCLI: events send, workflows list and runs list|get against a real server,
// as tables and as --json, with the errors a person meets.
func TestNativeCLI(t *testing.T) {
	t.Parallel()
	srv, err := servertest.Start(servertest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	ep := httptest.NewServer(mux)
	t.Cleanup(ep.Close)
	greet := func(c *sdk.Context) (any, error) {
		ev, _ := c.Event()
		return sdk.Run(c, "greet", func() (string, error) { return "hello " + string(ev.Data), nil })
	}
	app, err := sdk.NewApp("accounts", ep.URL+"/wf", []sdk.Workflow{
		{Name: "greet", Triggers: []string{"user.created"}, Handler: greet},
		{Name: "limited", Triggers: []string{"user.created"}, Handler: greet, RateLimit: &sdk.Rate{Limit: 1, PerMs: 60_000},
			Concurrency: []sdk.Concurrency{{Limit: 2, Key: "user"}}, Singleton: &sdk.Singleton{Key: "team", Mode: "skip"}},
	}, sdk.WithServeEnv(srv.Env()))
	require.NoError(t, err)
	mux.Handle("/wf/", app)
	client, err := sdk.NewClient(sdk.WithEnv(srv.Env()))
	require.NoError(t, err)
	_, err = client.RegisterApp(context.Background(), app)
	require.NoError(t, err)
	env := map[string]string{"DURATON_URL": srv.URL, "DURATON_TOKEN": servertest.Token}

	code, out, errOut := cliRun(env, "events", "send", "user.created", `{"user":"ann"}`)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^event evt_\S+\nWORKFLOW +OUTCOME +RUN\n`, out)
	require.Regexp(t, `(?m)^greet +started +wfr_\S+$`, out)
	require.Regexp(t, `(?m)^limited +started +wfr_\S+$`, out)
	runID := regexp.MustCompile(`(?m)^greet +started +(wfr_\S+)$`).FindStringSubmatch(out)[1]
	first := out

	code, out, errOut = cliRun(env, "events", "send", "user.created", `{"user":"bob"}`, "--dedupe-id", "d1")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^limited +dropped \(rateLimit\) +-$`, out)
	code, out, _ = cliRun(env, "events", "send", "--dedupe-id", "d1", "user.created", `{"user":"bob"}`)
	require.Equal(t, 0, code)
	require.Contains(t, out, `deduped (dedupe id "d1" was already sent; nothing started)`)
	code, out, errOut = cliRun(env, "events", "send", "nobody.listens")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `no workflow is triggered by "nobody.listens"`)
	code, out, _ = cliRun(env, "events", "send", "nobody.listens", "7", "--json")
	require.Equal(t, 0, code)
	var sent struct{ Events []sdk.EventResult }
	require.NoError(t, json.Unmarshal([]byte(out), &sent), out)
	require.Len(t, sent.Events, 1)
	require.Empty(t, sent.Events[0].Runs)

	code, out, errOut = cliRun(env, "workflows", "list")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^APP +WORKFLOW +TRIGGERS +CONTROLS +URL\n`, out)
	require.Regexp(t, `(?m)^accounts +greet +user.created +- +`+regexp.QuoteMeta(ep.URL)+`/wf/greet$`, out)
	require.Regexp(t, `(?m)^accounts +limited +user.created +concurrency,rateLimit,singleton +`, out)
	code, out, _ = cliRun(env, "workflows", "list", "--app", "other")
	require.Equal(t, 0, code)
	require.Contains(t, out, "no workflows registered")

	// The run ends; runs get shows it with its step.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut = cliRun(env, "runs", "get", runID, "--json")
		require.Equal(t, 0, code, errOut)
		var r struct{ Status string }
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		if r.Status == "succeeded" {
			break
		}
		require.True(t, time.Now().Before(deadline), "run %s still %s", runID, r.Status)
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errOut = cliRun(env, "runs", "get", runID)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^run +`+runID+`$`, out)
	require.Regexp(t, `(?m)^workflow +greet \(app accounts\)$`, out)
	require.Regexp(t, `(?m)^status +succeeded$`, out)
	require.Regexp(t, `(?m)^events +evt_\S+$`, out)
	require.Regexp(t, `(?m)^1 +greet +Run +succeeded +\S+ +"hello \{\\"user\\":\\"ann\\"\}"$`, out)

	limitedID := regexp.MustCompile(`(?m)^limited +started +(wfr_\S+)$`).FindStringSubmatch(first)[1]
	code, out, errOut = cliRun(env, "runs", "get", limitedID)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^key concurrency +user = "ann"$`, out)
	require.Regexp(t, `(?m)^key rateLimit +whole workflow$`, out)
	require.Regexp(t, `(?m)^key singleton +whole workflow \(team resolved to no scalar\)$`, out)

	code, out, errOut = cliRun(env, "runs", "list", "--workflow", "greet")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^RUN +WORKFLOW +APP +STATUS +CREATED +ENDED +WAITING\n`, out)
	require.Regexp(t, `(?m)^`+runID+` +greet +accounts +succeeded +\d{4}-\S+Z +\d{4}-\S+Z +-$`, out)
	require.Equal(t, 3, strings.Count(out, "\n"), "header and greet's two runs: %s", out)
	code, out, _ = cliRun(env, "runs", "list", "--workflow", "greet", "--limit", "1")
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^more: duraton runs list --cursor \S+$`, out)
	// The search filters: q over the triggering event, event name, creation time.
	code, out, errOut = cliRun(env, "runs", "list", "--workflow", "greet", "--q", `event.data.user == "ann"`, "--event-name", "user.created", "--from", "1000")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "\n"), "header and ann's run: %s", out)
	require.Contains(t, out, runID)
	code, out, _ = cliRun(env, "runs", "list", "--to", "2000-01-01T00:00:00Z")
	require.Equal(t, 0, code)
	require.Equal(t, "no runs\n", out)
	code, _, errOut = cliRun(env, "runs", "list", "--q", "event.data.user ==")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "400")
	require.Contains(t, errOut, "q: ")

	// Flags override the environment.
	code, out, errOut = cliRun(map[string]string{"DURATON_URL": "http://127.0.0.1:1", "DURATON_TOKEN": "nope"},
		"runs", "list", "--url", srv.URL, "--token", servertest.Token, "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, runID)

	// Errors name what is wrong and what to do.
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{env, []string{"runs", "get", "wfr_nope"}, 1, "runs get: the server answered 404: "},
		{map[string]string{"DURATON_URL": srv.URL, "DURATON_TOKEN": "wrong"}, []string{"workflows", "list"}, 1, "answered 401: invalid token (set DURATON_TOKEN or --token"},
		{map[string]string{"DURATON_URL": srv.URL}, []string{"runs", "list"}, 1, "answered 401"},
		{map[string]string{"DURATON_URL": "http://127.0.0.1:1"}, []string{"runs", "list"}, 1, "cannot reach Duraton at http://127.0.0.1:1 (is it running? set DURATON_URL or --url)"},
		{env, []string{"events", "send", "x", "{bad"}, 1, `DATA "{bad" is not JSON`},
		{env, []string{"events", "send"}, 1, "want NAME and optionally DATA"},
		{env, []string{"runs", "list", "--status", "nap"}, 1, "answered 400: status:"},
		{env, []string{"runs", "get"}, 1, "want exactly one RUN-ID"},
		{env, []string{"runs"}, 2, "usage: duraton runs list"},
		{env, []string{"events"}, 2, "usage: duraton events send"},
		{env, []string{"workflows", "show"}, 2, "usage: duraton workflows list"},
		{env, []string{"runs", "list", "--bogus"}, 2, "flag provided but not defined"},
	} {
		code, _, errOut := cliRun(tc.env, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}
