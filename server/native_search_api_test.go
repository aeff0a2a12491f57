package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
)

// sendAccounts sends n events "acct.sync" with data {accountId: a<i%10>, i} in one
// request and returns the run ids by account.
func (e *apiEnv) sendAccounts(t *testing.T, from, n int, byAccount map[string][]string) {
	t.Helper()
	events := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		events = append(events, fmt.Sprintf(`{"name": "acct.sync", "data": {"accountId": "a%d", "i": %d}}`, i%10, i))
	}
	res := e.sendEvents(t, "["+strings.Join(events, ",")+"]")
	require.Len(t, res, n)
	for i, ev := range res {
		require.Len(t, ev.Runs, 1)
		acct := fmt.Sprintf("a%d", (from+i)%10)
		byAccount[acct] = append(byAccount[acct], ev.Runs[0].RunID)
	}
}

// allRuns follows GET /runs pages of query and returns every run id, in order.
func (e *apiEnv) allRuns(t *testing.T, query url.Values) []string {
	t.Helper()
	var all []string
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100)
		ids, cursor := e.runList(t, "?"+query.Encode())
		all = append(all, ids...)
		if cursor == "" {
			return all
		}
		query.Set("cursor", cursor)
	}
}

func sorted(ids []string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// TestRunSearch: among 1,000 runs (held by a throttle, so nothing runs), q over the
// triggering event finds exactly one account's runs; from/to split the runs of two
// requests; eventName and workflow combine with AND; a bad parameter is a 400 naming
// it; a bulk cancel by q cancels exactly those runs.
func TestRunSearch(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [
		{"name": "sync", "url": %q, "triggers": [{"event": "acct.sync"}], "retries": 0,
		 "throttle": {"limit": 1, "perMs": 604800000}},
		{"name": "other", "url": %q, "triggers": [{"event": "other"}], "retries": 0}]}`,
		env.Endpoint.URL("/fail/sync"), env.Endpoint.URL("/fail/other")))
	byAccount := map[string][]string{}
	env.sendAccounts(t, 0, 500, byAccount)
	time.Sleep(5 * time.Millisecond)
	split := time.Now()
	time.Sleep(5 * time.Millisecond)
	env.sendAccounts(t, 500, 500, byAccount)
	env.sendEvents(t, `{"name": "other", "data": {"accountId": "a1"}}`)

	q := url.Values{"q": {`event.data.accountId == "a1"`}, "limit": {"1000"}}
	got := env.allRuns(t, q)
	want := append([]string{}, byAccount["a1"]...)
	require.Len(t, want, 100)
	q.Set("workflow", "sync")
	q.Del("cursor")
	require.Equal(t, sorted(want), sorted(env.allRuns(t, q)), "exactly a1's runs of sync")
	require.Len(t, got, 101, "and the other workflow's run of a1")

	q = url.Values{"eventName": {"acct.sync"}, "from": {split.UTC().Format(time.RFC3339Nano)}, "limit": {"1000"}}
	second := env.allRuns(t, q)
	require.Len(t, second, 500, "the second request's runs")
	q = url.Values{"workflow": {"sync"}, "to": {fmt.Sprint(split.UnixMilli())}, "limit": {"1000"}}
	first := env.allRuns(t, q)
	require.Len(t, first, 500, "the first request's runs")
	require.Empty(t, env.allRuns(t, url.Values{"eventName": {"nothing"}}))

	for query, want := range map[string]string{
		"?from=yesterday":    "from:",
		"?to=-5":             "to:",
		"?from=2000&to=1000": "from:",
		"?q=" + url.QueryEscape("event.data.accountId ==="): "q:",
		"?q=" + url.QueryEscape("1 + 2"):                    "q:",
		"?q=" + url.QueryEscape("other.x == 1"):             "q:",
		"?since=1":                                          "since:",
		"?label=" + strings.Repeat("x", 300):                "label:",
		"?workflow=a&workflow=b":                            "workflow:",
	} {
		r := env.call(t, http.MethodGet, "/runs"+query, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "GET /runs%s: %s", query, r.Body)
		require.Contains(t, r.errorMessage(t), want, "GET /runs%s", query)
	}

	// Bulk cancel by the same filters: a dry run counts, then the cancel acts.
	body := `{"workflow": "sync", "q": "event.data.accountId == \"a1\"", "dryRun": true}`
	res := env.bulk(t, "cancel", body)
	require.Equal(t, bulkAnswer{Matched: 100}, res)
	res = env.bulk(t, "cancel", strings.Replace(body, `"dryRun": true`, `"limit": 30`, 1))
	require.Equal(t, 30, res.Done)
	require.NotEmpty(t, res.Cursor)
	res = env.bulk(t, "cancel", strings.Replace(body, `"dryRun": true`, `"cursor": "`+res.Cursor+`"`, 1))
	require.Equal(t, bulkAnswer{Matched: 70, Done: 70}, res)
	for _, id := range byAccount["a1"] {
		run, _ := env.fullRun(t, id)
		if run.Status == "failed" {
			continue // the one run the throttle let start
		}
		require.Equal(t, "cancelled", run.Status, id)
		require.Equal(t, map[string]any{"api": true}, run.CancelledBy)
	}
	a2, _ := env.fullRun(t, byAccount["a2"][0])
	require.NotEqual(t, "cancelled", a2.Status, "other accounts' runs are left alone")

	r := env.call(t, http.MethodPost, "/runs/cancel", []byte(`{}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "all")
	require.Equal(t, bulkAnswer{Matched: 899}, env.bulk(t, "cancel", `{"all": true, "dryRun": true}`), "the live runs")
	r = env.call(t, http.MethodPost, "/runs/cancel", []byte(`{"status": "failed", "cap": {"maxTokens": 5}}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "cap")
}

type bulkAnswer struct {
	Matched int    `json:"matched"`
	Done    int    `json:"done"`
	Cursor  string `json:"cursor"`
}

func (e *apiEnv) bulk(t *testing.T, op, body string) bulkAnswer {
	t.Helper()
	r := e.call(t, http.MethodPost, "/runs/"+op, []byte(body), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "POST /runs/%s %s: %s", op, body, r.Body)
	var out bulkAnswer
	require.NoError(t, json.Unmarshal(r.Body, &out))
	return out
}

// TestBulkReplay: 500 runs fail; a dry run of a bulk replay counts 500, then the replay
// resumes them all, 200 per request following the cursor.
func TestBulkReplay(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	ep := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
		if healthy.Load() {
			return http.StatusOK, h, "{}"
		}
		return http.StatusInternalServerError, h, "down"
	})
	env := newAPI(t, envOptions{})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], "retries": 0}]}`, ep.URL("/wf")))
	events := make([]string, 500)
	for i := range events {
		events[i] = `{"name": "e", "data": {}}`
	}
	env.sendEvents(t, "["+strings.Join(events, ",")+"]")
	dry := `{"workflow": "wf", "status": "failed", "dryRun": true}`
	// 500 deliveries fail first: allow for a loaded machine (the race detector, a full suite).
	deliverytest.Eventually(t, 2*time.Minute, "500 failed runs", func() bool { return env.bulk(t, "replay", dry).Matched == 500 })
	require.Equal(t, bulkAnswer{Matched: 500}, env.bulk(t, "replay", dry), "a dry run only counts")
	require.Equal(t, bulkAnswer{Matched: 500}, env.bulk(t, "replay", dry), "and changes nothing")

	healthy.Store(true)
	done, requests, cursor := 0, 0, ""
	for {
		body := `{"workflow": "wf", "status": "failed", "limit": 200}`
		if cursor != "" {
			body = `{"workflow": "wf", "status": "failed", "limit": 200, "cursor": "` + cursor + `"}`
		}
		res := env.bulk(t, "replay", body)
		require.Equal(t, res.Matched, res.Done)
		done += res.Done
		requests++
		if cursor = res.Cursor; cursor == "" {
			break
		}
		require.Equal(t, 200, res.Done)
	}
	require.Equal(t, 500, done)
	require.Equal(t, 3, requests, "200 + 200 + 100")
	require.Equal(t, bulkAnswer{Matched: 0}, env.bulk(t, "replay", dry), "no run is failed now")
	require.Equal(t, bulkAnswer{Matched: 500}, env.bulk(t, "cancel", `{"workflow": "wf", "dryRun": true}`), "every run is live again")
}
