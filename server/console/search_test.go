package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/delivery/native"
)

// searchEnv holds project a's native runs: five live sync.account runs (three of
// account a1, two of a2; their endpoint holds the one running delivery until the test
// ends, the others queue behind a concurrency of 1) and two failed charge runs.
type searchEnv struct {
	*env
	a1, a2, charge []string
}

func newSearchEnv(t *testing.T, cfg Config) *searchEnv {
	t.Helper()
	e := newEnv(t, cfg)
	release := make(chan struct{})
	held := deliverytest.NewEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK, nil, "{}"
	})
	t.Cleanup(func() { close(release) }) // before the endpoint closes: cleanups run last first
	failing := failingEndpoint(t)
	defs, err := e.native.ParseApp("shop", []byte(`{"workflows":[
		{"name":"sync.account","url":"`+held.URL("/sync")+`","triggers":[{"event":"account.updated"}],"concurrency":{"limit":1}},
		{"name":"charge","url":"`+failing+`/charge","triggers":[{"event":"pay"}],"retries":0}]}`))
	require.NoError(t, err)
	_, err = e.native.PutApp(t.Context(), "a", "shop", defs)
	require.NoError(t, err)
	s := &searchEnv{env: e}
	for _, acct := range []string{"a1", "a2", "a1", "a2", "a1"} {
		res, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "account.updated", Data: []byte(`{"accountId":"` + acct + `"}`)}})
		require.NoError(t, err)
		id := res[0].Runs[0].RunID
		if acct == "a1" {
			s.a1 = append(s.a1, id)
		} else {
			s.a2 = append(s.a2, id)
		}
	}
	for range 2 {
		res, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "pay", Data: []byte(`{}`)}})
		require.NoError(t, err)
		s.charge = append(s.charge, res[0].Runs[0].RunID)
	}
	deliverytest.Eventually(t, 10*time.Second, "both charge runs failed", func() bool {
		return len(s.statuses(t, native.StatusFailed)) == 2
	})
	return s
}

// statuses is the ids of project a's runs in status.
func (s *searchEnv) statuses(t *testing.T, status string) []string {
	t.Helper()
	views, _, err := s.native.Runs(t.Context(), "a", native.RunFilter{Status: status}, nil, 100)
	require.NoError(t, err)
	var ids []string
	for _, v := range views {
		ids = append(ids, v.RunID)
	}
	slices.Sort(ids)
	return ids
}

// live is the ids of project a's live runs.
func (s *searchEnv) live(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, st := range []string{native.StatusQueued, native.StatusRunning, native.StatusSleeping, native.StatusWaiting} {
		ids = append(ids, s.statuses(t, st)...)
	}
	slices.Sort(ids)
	return ids
}

var runRowRE = regexp.MustCompile(`<tr data-run="([^"]+)"`)

// rows is the run ids a runs page lists.
func rows(body string) []string {
	var ids []string
	for _, m := range runRowRE.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...[]string) []string {
	out := slices.Concat(ids...)
	slices.Sort(out)
	return out
}

func TestRunsSearchNarrows(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	for query, want := range map[string][]string{
		"": sorted(s.a1, s.a2, s.charge), // a project with native workflows opens on them
		"?q=" + url.QueryEscape(`event.data.accountId == "a1"`): sorted(s.a1),
		"?kind=native&workflow=charge":                          sorted(s.charge),
		"?status=failed":                                        sorted(s.charge),
		"?eventName=account.updated&q=" + url.QueryEscape(`event.data.accountId == "a2"`):       sorted(s.a2),
		"?from=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")):  nil,
		"?to=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05")): sorted(s.a1, s.a2, s.charge),
	} {
		status, _, body := v.get("/console/runs" + query)
		require.Equal(t, http.StatusOK, status, "%s: %s", query, body)
		require.Equal(t, want, rows(body), query)
	}
	_, _, body := v.get("/console/runs?q=" + url.QueryEscape(`event.data.accountId == "a1"`))
	require.Contains(t, body, `value="event.data.accountId == &#34;a1&#34;"`, "the form keeps the search")

	_, _, body = v.get("/console/runs?status=RUN_FAILED") // the Overview's link
	require.Equal(t, sorted(s.charge), rows(body), "an engine state opens the All runs tab")
	_, _, body = v.get("/console/runs?kind=all&label=nope")
	require.Empty(t, rows(body))
	b := s.visitor(t)
	b.login(tokenB)
	_, _, body = b.get("/console/runs?kind=native")
	require.Empty(t, rows(body), "another project's runs")
}

// TestRunsSearchPages: the next page link carries the API's cursor; the pages together
// hold every run once.
func TestRunsSearchPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	defs, err := e.native.ParseApp("shop", []byte(`{"workflows":[{"name":"charge","url":"`+failingEndpoint(t)+`","triggers":[{"event":"pay"}],"retries":0}]}`))
	require.NoError(t, err)
	_, err = e.native.PutApp(t.Context(), "a", "shop", defs)
	require.NoError(t, err)
	var all []string
	for range listRuns + 5 {
		res, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "pay", Data: []byte(`{}`)}})
		require.NoError(t, err)
		all = append(all, res[0].Runs[0].RunID)
	}
	slices.Sort(all)
	v := e.visitor(t)
	v.login(tokenA)
	_, _, first := v.get("/console/runs?workflow=charge")
	require.Len(t, rows(first), listRuns)
	next := regexp.MustCompile(`href="([^"]+)" id="next-page"`).FindStringSubmatch(first)
	require.NotNil(t, next, "a next page link")
	link := html.UnescapeString(next[1])
	require.Contains(t, link, "cursor=")
	require.Contains(t, link, "workflow=charge", "the link keeps the search")
	_, _, second := v.get(link)
	require.Len(t, rows(second), 5)
	require.NotContains(t, second, `id="next-page"`)
	require.Equal(t, all, sorted(rows(first), rows(second)))
}

// TestRunsSearchBadInput: a refused search answers 400 with the API's message, keeps
// the form, and neither lists nor polls.
func TestRunsSearchBadInput(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	apiMessage := func(rs native.RunSearch) string {
		_, err := rs.Filter()
		require.ErrorIs(t, err, native.ErrInvalid)
		return strings.TrimPrefix(err.Error(), native.ErrInvalid.Error()+": ")
	}
	for query, want := range map[string]string{
		"q=" + url.QueryEscape(`event.data.accountId ==`): apiMessage(native.RunSearch{Q: `event.data.accountId ==`}),
		"q=" + url.QueryEscape(`1 + 2`):                   apiMessage(native.RunSearch{Q: `1 + 2`}),
		"from=2026-01-02T10:00&to=2026-01-01T10:00": fmt.Sprintf("from: %d is after to (%d)",
			time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC).UnixMilli(), time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixMilli()),
		"status=bogus":                         `status: "bogus" is not a run status`,
		"from=yesterday":                       `from: want an RFC 3339 time or unix milliseconds, got "yesterday"`,
		"cursor=nonsense":                      `cursor: "nonsense" is not a cursor returned by this API`,
		"workflow=" + strings.Repeat("w", 300): "workflow: at most 256 bytes, got 300",
		"q=" + strings.Repeat("x", 5000):       "q: longer than 4096 bytes",
	} {
		status, _, body := v.get("/console/runs?kind=native&" + query)
		require.Equal(t, http.StatusBadRequest, status, query)
		require.Contains(t, html.UnescapeString(body), "Error: "+want, query)
		require.Contains(t, body, `id="search"`, "%s: the form stays to correct it", query)
		require.NotContains(t, body, "hx-get", "%s: a refused search does not poll", query)
		require.Empty(t, rows(body), query)
	}
	status, _, body := v.get("/console/runs?kind=other")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "kind: want native or all")

	// The bulk step refuses the same bad filter, and changes nothing.
	live := s.live(t)
	require.Len(t, live, 5)
	token := v.csrf("/console/runs")
	for _, step := range []string{bulkCount, bulkAct} {
		status, _, body = v.post("/console/runs/bulk", url.Values{"csrf": {token}, "op": {"cancel"}, "step": {step}, "q": {"event.data.accountId =="}})
		require.Equal(t, http.StatusBadRequest, status, step)
		require.Contains(t, html.UnescapeString(body), apiMessage(native.RunSearch{Q: `event.data.accountId ==`}))
	}
	for form, want := range map[string]url.Values{
		"op: want cancel or replay": {"op": {"delete"}, "step": {bulkAct}, "workflow": {"charge"}},
		"step: want count or act":   {"op": {"cancel"}, "step": {"go"}, "workflow": {"charge"}},
		"asof: want unix ms":        {"op": {"cancel"}, "step": {bulkAct}, "workflow": {"charge"}, "asof": {"soon"}},
	} {
		want.Set("csrf", token)
		status, _, body = v.post("/console/runs/bulk", want)
		require.Equal(t, http.StatusBadRequest, status, form)
		require.Contains(t, body, strings.Split(form, " ")[0], form)
	}
	require.Equal(t, live, s.live(t), "refused bulk steps change nothing")
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// confirmForm is the form fields of a confirm page's form.
func confirmForm(t *testing.T, body string) url.Values {
	t.Helper()
	i := strings.Index(body, `<form method="post" action="/console/runs/bulk"`)
	require.GreaterOrEqual(t, i, 0, "a confirm form: %s", body)
	form := body[i : i+strings.Index(body[i:], "</form>")]
	out := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(form, -1) {
		out.Add(m[1], html.UnescapeString(m[2]))
	}
	return out
}

var countRE = regexp.MustCompile(`<strong id="bulk-count">(\d+)</strong>`)

func TestBulkCancelAsksThenActs(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	_, _, page := v.get("/console/runs?q=" + url.QueryEscape(`event.data.accountId == "a1"`))
	requireStrict(t, page)
	count := confirmForm(t, page) // the runs page's bulk form carries the search
	require.Equal(t, `event.data.accountId == "a1"`, count.Get("q"))
	count.Set("op", "cancel")

	status, _, body := v.post("/console/runs/bulk", count)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "3", countRE.FindStringSubmatch(body)[1])
	require.Contains(t, html.UnescapeString(body), `Cancel <strong id="bulk-count">3</strong> runs matching q = event.data.accountId == "a1"?`)
	require.Equal(t, sorted(s.a1, s.a2), s.live(t), "the count cancels nothing")
	requireStrict(t, body)

	confirm := confirmForm(t, body)
	require.Equal(t, bulkAct, confirm.Get("step"))
	require.Empty(t, confirm.Get("all"), "a filtered action is not every run")
	status, _, body = v.post("/console/runs/bulk", confirm)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `Cancelled <strong id="bulk-done">3</strong> of the 3 matching run(s).`)
	require.Equal(t, sorted(s.a1), s.statuses(t, native.StatusCancelled), "exactly a1's runs")
	require.Equal(t, sorted(s.a2), s.live(t), "a2's runs are untouched")
	require.Equal(t, sorted(s.charge), s.statuses(t, native.StatusFailed))
}

// TestBulkWithoutFilterIsEveryRun: without a filter the confirm says it is every run,
// and the act step needs its "all".
func TestBulkWithoutFilterIsEveryRun(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	token := v.csrf("/console/runs")
	status, _, body := v.post("/console/runs/bulk", url.Values{"csrf": {token}, "op": {"cancel"}, "step": {bulkCount}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `Cancel <strong id="bulk-count">5</strong> runs — every run of the project (no filter)?`)
	confirm := confirmForm(t, body)
	require.Equal(t, "1", confirm.Get("all"))

	without := url.Values{}
	for k, vs := range confirm {
		if k != "all" {
			without[k] = vs
		}
	}
	status, _, body = v.post("/console/runs/bulk", without)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "all: without any filter this acts on every run of the project")
	require.Len(t, s.live(t), 5, "refused: nothing cancelled")

	// A run created after the count is left alone by the confirm.
	asof, err := strconv.ParseInt(confirm.Get("asof"), 10, 64)
	require.NoError(t, err)
	for time.Now().UnixMilli() <= asof { // a later millisecond than the count's
		time.Sleep(time.Millisecond)
	}
	res, err := s.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "account.updated", Data: []byte(`{"accountId":"a3"}`)}})
	require.NoError(t, err)
	later := res[0].Runs[0].RunID
	status, _, body = v.post("/console/runs/bulk", confirm)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `Cancelled <strong id="bulk-done">5</strong> of the 5 matching run(s).`)
	require.Equal(t, []string{later}, s.live(t), "the run created after the count is still live")
}

func TestBulkReplayAsksThenActs(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	token := v.csrf("/console/runs")
	status, _, body := v.post("/console/runs/bulk", url.Values{"csrf": {token}, "op": {"replay"}, "step": {bulkCount}, "workflow": {"sync.account"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "No runs match workflow = sync.account: nothing to replay.")
	require.NotContains(t, body, `id="bulk-confirm"`)

	status, _, body = v.post("/console/runs/bulk", url.Values{"csrf": {token}, "op": {"replay"}, "step": {bulkCount}, "status": {"failed"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "2", countRE.FindStringSubmatch(body)[1])
	require.Equal(t, sorted(s.charge), s.statuses(t, native.StatusFailed), "the count replays nothing")
	status, _, body = v.post("/console/runs/bulk", confirmForm(t, body))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `Replayed <strong id="bulk-done">2</strong> of the 2 matching run(s).`)
}

// TestBulkNeedsCSRF: the bulk steps are POSTs of the session's CSRF token and the
// console's own origin, as every console action.
func TestBulkNeedsCSRF(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{})
	v := s.visitor(t)
	v.login(tokenA)
	form := url.Values{"op": {"cancel"}, "step": {bulkAct}, "workflow": {"sync.account"}}
	status, _, body := v.post("/console/runs/bulk", form)
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "missing or wrong CSRF token")
	form.Set("csrf", "0000")
	status, _, _ = v.post("/console/runs/bulk", form)
	require.Equal(t, http.StatusForbidden, status)
	form.Set("csrf", v.csrf("/console/runs"))
	status, _, _ = v.post("/console/runs/bulk", form, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, status)
	status, _, _ = s.visitor(t).post("/console/runs/bulk", form)
	require.Equal(t, http.StatusForbidden, status, "another browser without the session")
	require.Len(t, s.live(t), 5, "nothing cancelled")
	status, _, _ = v.post("/console/runs/bulk", form)
	require.Equal(t, http.StatusOK, status, "the same post with the token acts")
	require.Empty(t, s.live(t))
}

// TestBulkPagesThroughLargeSets: one step handles at most BulkLimit runs; the result
// offers the next ones, and going on covers every matching run exactly once.
func TestBulkPagesThroughLargeSets(t *testing.T) {
	t.Parallel()
	s := newSearchEnv(t, Config{BulkLimit: 2})
	v := s.visitor(t)
	v.login(tokenA)
	form := url.Values{"csrf": {v.csrf("/console/runs")}, "op": {"cancel"}, "step": {bulkCount}, "workflow": {"sync.account"}}
	var counts []string
	for range 10 {
		status, _, body := v.post("/console/runs/bulk", form)
		require.Equal(t, http.StatusOK, status, body)
		counts = append(counts, countRE.FindStringSubmatch(body)[1])
		more := strings.Contains(body, "the first <strong")
		status, _, body = v.post("/console/runs/bulk", confirmForm(t, body))
		require.Equal(t, http.StatusOK, status, body)
		if !more {
			require.NotContains(t, body, `id="bulk-next"`)
			break
		}
		require.Contains(t, body, `id="bulk-next"`, "the result offers the next runs")
		form = confirmForm(t, body)
		require.Equal(t, bulkCount, form.Get("step"))
		require.NotEmpty(t, form.Get("cursor"))
	}
	require.Equal(t, []string{"2", "2", "1"}, counts)
	require.Equal(t, sorted(s.a1, s.a2), s.statuses(t, native.StatusCancelled))
	require.Empty(t, s.live(t))
}

// requireStrict fails on a page with what the console's CSP would block: inline script,
// inline style, event-handler attributes.
func requireStrict(t *testing.T, body string) {
	t.Helper()
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(body, -1) {
		require.Contains(t, tag, ` src="/console/static/`, "inline or foreign script %s", tag)
	}
	blocked := regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=|javascript:`)
	require.False(t, blocked.MatchString(body), "inline style or handler: %s", blocked.FindString(body))
}
