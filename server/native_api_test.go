package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nativeWorkflow is a definition as GET /workflows shows it.
type nativeWorkflow struct {
	App         string                     `json:"app"`
	Name        string                     `json:"name"`
	URL         string                     `json:"url"`
	Triggers    []map[string]string        `json:"triggers"`
	Retries     int                        `json:"retries"`
	FlowControl map[string]json.RawMessage `json:"flowControl"`
	CreatedAt   int64                      `json:"createdAt"`
	UpdatedAt   int64                      `json:"updatedAt"`
}

type nativeApp struct {
	Name      string           `json:"name"`
	Workflows []nativeWorkflow `json:"workflows"`
}

func (e *apiEnv) putApp(t *testing.T, app, body string) apiResponse {
	t.Helper()
	return e.call(t, http.MethodPut, "/apps/"+app, []byte(body), "Content-Type", "application/json")
}

func (e *apiEnv) mustPutApp(t *testing.T, app, body string) nativeApp {
	t.Helper()
	r := e.putApp(t, app, body)
	require.Equal(t, http.StatusOK, r.Status, "PUT /apps/%s: %s", app, r.Body)
	return decodeJSON[nativeApp](t, r)
}

func (e *apiEnv) workflowNames(t *testing.T, query string) []string {
	t.Helper()
	r := e.call(t, http.MethodGet, "/workflows"+query, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var names []string
	for _, w := range decodeJSON[struct{ Workflows []nativeWorkflow }](t, r).Workflows {
		names = append(names, w.App+"/"+w.Name)
	}
	return names
}

func TestNativeAppsLifecycle(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	url := env.Endpoint.URL("/wf")
	app := env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [
		{"name": "index.documents", "url": %q, "triggers": [{"event": "doc.updated"}],
		 "batch": {"maxSize": 100, "timeoutMs": 5000, "key": "index"},
		 "concurrency": {"limit": 5, "key": "accountId"}},
		{"name": "sync.account", "url": %q, "triggers": [{"event": "doc.updated"}, {"event": "account.changed"}], "retries": 0,
		 "throttle": {"limit": 10, "perMs": 60000}, "rateLimit": {"limit": 3, "perMs": 1000, "key": "user.id"},
		 "debounce": {"periodMs": 5000, "timeoutMs": 60000}, "priority": {"shiftMs": 1000}, "singleton": {"mode": "skip"},
		 "idempotency": {"key": "orderId"}, "cap": {"maxCost": 1.5, "maxTokens": 100000},
		 "tokenThrottle": {"tokens": 1000, "perMs": 60000, "key": "accountId"}}
	]}`, url+"/index", url+"/sync"))
	require.Equal(t, "docs", app.Name)
	require.Len(t, app.Workflows, 2)
	idx := app.Workflows[0]
	require.Equal(t, "index.documents", idx.Name)
	require.Equal(t, 3, idx.Retries, "retries default to 3")
	require.JSONEq(t, `[{"limit":5,"key":"accountId"}]`, string(idx.FlowControl["concurrency"]), "a single concurrency is normalized to an array")
	require.JSONEq(t, `{"maxSize":100,"timeoutMs":5000,"key":"index"}`, string(idx.FlowControl["batch"]))
	sync := app.Workflows[1]
	require.Equal(t, 0, sync.Retries)
	require.JSONEq(t, `{"mode":"skip"}`, string(sync.FlowControl["singleton"]))
	require.JSONEq(t, `{"key":"orderId","periodMs":86400000}`, string(sync.FlowControl["idempotency"]), "idempotency period defaults to 24 h")
	require.JSONEq(t, `{"maxCost":1.5,"maxTokens":100000}`, string(sync.FlowControl["cap"]), "cap is stored")
	require.JSONEq(t, `{"tokens":1000,"perMs":60000,"key":"accountId"}`, string(sync.FlowControl["tokenThrottle"]), "tokenThrottle is stored")
	require.Len(t, sync.FlowControl, 8)

	env.mustPutApp(t, "billing", fmt.Sprintf(`{"workflows": [{"name": "invoice", "url": %q, "triggers": [{"event": "order.paid"}]}]}`, url))
	require.Equal(t, []string{"docs/index.documents", "billing/invoice", "docs/sync.account"}, env.workflowNames(t, ""))
	require.Equal(t, []string{"docs/index.documents", "docs/sync.account"}, env.workflowNames(t, "?app=docs"))

	r := env.call(t, http.MethodGet, "/workflows/sync.account", nil)
	require.Equal(t, http.StatusOK, r.Status)
	got := decodeJSON[nativeWorkflow](t, r)
	require.Equal(t, sync, got)

	r = env.call(t, http.MethodGet, "/apps", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, fmt.Sprintf(`{"apps": [
		{"name": "billing", "workflows": ["invoice"], "createdAt": %[1]d, "updatedAt": %[1]d},
		{"name": "docs", "workflows": ["index.documents", "sync.account"], "createdAt": %[2]d, "updatedAt": %[2]d}]}`,
		decodeJSON[struct{ Apps []struct{ CreatedAt int64 } }](t, r).Apps[0].CreatedAt, idx.CreatedAt), string(r.Body))

	// Another app cannot take a name: 409, and nothing of the request is stored.
	r = env.putApp(t, "billing", fmt.Sprintf(`{"workflows": [{"name": "refund", "url": %q, "triggers": [{"event": "x"}]},
		{"name": "sync.account", "url": %q, "triggers": [{"event": "x"}]}]}`, url, url))
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), `workflow "sync.account"`)
	require.Contains(t, r.errorMessage(t), `app "docs"`)
	require.Equal(t, []string{"docs/index.documents", "billing/invoice", "docs/sync.account"}, env.workflowNames(t, ""))

	// Replacing an app replaces its whole set: a workflow left out is gone.
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "sync.account", "url": %q, "triggers": [{"event": "account.changed"}]}]}`, url))
	require.Equal(t, []string{"billing/invoice", "docs/sync.account"}, env.workflowNames(t, ""))
	r = env.call(t, http.MethodGet, "/workflows/sync.account", nil)
	replaced := decodeJSON[nativeWorkflow](t, r)
	require.Empty(t, replaced.FlowControl, "the replacement has no controls")
	require.Equal(t, sync.CreatedAt, replaced.CreatedAt, "createdAt survives a replacement")
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/workflows/index.documents", nil).Status)
	// The removed workflow's name is free again, for any app.
	env.mustPutApp(t, "billing", fmt.Sprintf(`{"workflows": [{"name": "invoice", "url": %q, "triggers": [{"event": "order.paid"}]},
		{"name": "index.documents", "url": %q, "triggers": [{"event": "doc.updated"}]}]}`, url, url))

	// Another project sees none of it.
	other := env.withProject(t, "other", "other-token-0123456789abcdef0123456789")
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodGet, "/apps/docs", nil).Status)
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodGet, "/workflows/sync.account", nil).Status)
	require.Empty(t, other.workflowNames(t, ""))
	other.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "sync.account", "url": %q, "triggers": [{"event": "x"}]}]}`, url))

	r = env.call(t, http.MethodDelete, "/apps/docs", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/apps/docs", nil).Status)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodDelete, "/apps/docs", nil).Status)
	require.Equal(t, []string{"billing/index.documents", "billing/invoice"}, env.workflowNames(t, ""))
	require.Equal(t, []string{"docs/sync.account"}, other.workflowNames(t, ""), "the other project's app of the same name stays")

	require.Equal(t, http.StatusUnauthorized, env.send(t, func() *http.Request {
		req := env.request(t, http.MethodGet, "/workflows", nil)
		req.Header.Del("Authorization")
		return req
	}()).Status)
}

// TestNativeAppValidation: every refusal is a 400 naming the workflow and the field, and
// changes nothing.
func TestNativeAppValidation(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	url := env.Endpoint.URL("/wf")
	before := env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "keep", "url": %q, "triggers": [{"event": "e"}]}]}`, url))
	wf := func(fields string) string {
		return fmt.Sprintf(`{"workflows": [{"name": "keep", "url": %q, "triggers": [{"event": "e"}]},
			{"name": "wf", "url": %q, "triggers": [{"event": "e"}]%s}]}`, url, url, fields)
	}
	tests := []struct {
		name, body string
		want       []string
	}{
		{"UnknownField", wf(`, "concurency": {"limit": 1}`), []string{`workflow "wf"`, `"concurency"`, "unknown field"}},
		{"UnknownControlField", wf(`, "throttle": {"limit": 1, "perMs": 1000, "burst": 2}`), []string{`workflow "wf"`, `"throttle.burst"`}},
		{"OutOfRange", wf(`, "concurrency": {"limit": 100001}`), []string{`workflow "wf"`, `"concurrency.limit"`}},
		{"RateLimitPeriod", wf(`, "rateLimit": {"limit": 1, "perMs": 86400001}`), []string{`workflow "wf"`, `"rateLimit.perMs"`}},
		{"MalformedKey", wf(`, "idempotency": {"key": "user..id"}`), []string{`workflow "wf"`, `"idempotency.key"`, "malformed"}},
		{"LeadingDotKey", wf(`, "concurrency": [{"limit": 1}, {"limit": 2, "key": ".a"}]`), []string{`workflow "wf"`, `"concurrency[1].key"`}},
		{"BatchWithDebounce", wf(`, "batch": {"maxSize": 2, "timeoutMs": 1000}, "debounce": {"periodMs": 1000}`), []string{`workflow "wf"`, `"debounce"`, "batch"}},
		{"BatchWithIdempotency", wf(`, "batch": {"maxSize": 2, "timeoutMs": 1000}, "idempotency": {}`), []string{`workflow "wf"`, `"idempotency"`}},
		{"Retries", wf(`, "retries": 101`), []string{`workflow "wf"`, `"retries"`}},
		{"NoTriggers", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": []}]}`, url), []string{`workflow "wf"`, `"triggers"`}},
		{"TriggerField", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"evnt": "x"}]}]}`, url), []string{`workflow "wf"`, `"triggers[0].evnt"`}},
		{"BadName", fmt.Sprintf(`{"workflows": [{"name": "a b", "url": %q, "triggers": [{"event": "e"}]}]}`, url), []string{`"name"`}},
		{"NoName", fmt.Sprintf(`{"workflows": [{"url": %q, "triggers": [{"event": "e"}]}]}`, url), []string{`workflows[0]`, `"name"`}},
		{"BadURL", `{"workflows": [{"name": "wf", "url": "ftp://x", "triggers": [{"event": "e"}]}]}`, []string{`workflow "wf"`, `"url"`}},
		{"DuplicateName", wf(`, "retries": 1`)[:0] + fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}]}, {"name": "wf", "url": %q, "triggers": [{"event": "e"}]}]}`, url, url), []string{`workflow "wf"`, "workflows[0]"}},
		{"UnknownTopLevel", `{"workflows": [], "version": 2}`, []string{`"version"`}},
		{"NotJSON", `{"workflows": [`, []string{"JSON object"}},
	}
	for _, tt := range tests {
		r := env.putApp(t, "docs", tt.body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tt.name, r.Body)
		for _, w := range tt.want {
			require.Contains(t, r.errorMessage(t), w, tt.name)
		}
	}
	r := env.call(t, http.MethodGet, "/apps/docs", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, before, decodeJSON[nativeApp](t, r), "refused registrations changed nothing")
	require.Equal(t, http.StatusBadRequest, env.putApp(t, "bad%20name", `{"workflows": []}`).Status)
}

func TestNativeAppLimits(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	var b strings.Builder
	b.WriteString(`{"workflows": [`)
	for i := range 1001 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "w%d", "url": %q, "triggers": [{"event": "e"}]}`, i, env.Endpoint.URL("/wf"))
	}
	b.WriteString("]}")
	r := env.putApp(t, "big", b.String())
	require.Equal(t, http.StatusPreconditionFailed, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "1001 workflows")
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/apps/big", nil).Status)
}

// TestNativeAppURLQueryNormalised: a workflow URL whose query holds bytes a request line
// may not (a tag, quotes, spaces) is stored percent-encoded, and its runs reach the
// endpoint with the query the app meant.
func TestNativeAppURLQueryNormalised(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	raw := env.Endpoint.URL(`/wf?tag=<script>alert(1)</script>&q="a b"&n='1'`)
	app := env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "odd.query", "url": %q, "triggers": [{"event": "odd"}]}]}`, raw))
	want := env.Endpoint.URL(`/wf?tag=%3Cscript%3Ealert(1)%3C/script%3E&q=%22a%20b%22&n=%271%27`)
	require.Equal(t, want, app.Workflows[0].URL)

	env.sendEvents(t, `{"name": "odd", "data": {}}`)
	got := env.Endpoint.waitN(t, 1, func(q recorded) bool { return q.Path == "/wf" })[0]
	require.Equal(t, want, got.URL, "the request line carries the normalised query")
	u, err := url.Parse(got.URL)
	require.NoError(t, err)
	require.Equal(t, url.Values{"tag": {"<script>alert(1)</script>"}, "q": {`"a b"`}, "n": {"'1'"}}, u.Query())
}
