package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memOf reads a process's resident set (VmRSS) and its peak (VmHWM) in bytes from
// /proc/<pid>/status.
func memOf(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		require.NoError(t, err, "%s", sc.Text())
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	require.NoError(t, sc.Err())
	return rss, peak
}

// apiCall sends an authenticated request with extra headers (name, value pairs) and
// returns the status and body.
func (p *proc) apiCall(t *testing.T, client *http.Client, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, err := p.apiRequest(context.Background(), method, path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer res.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(res.Body).Decode(&raw)
	return res.StatusCode, string(raw)
}

// TestGroupAmplificationRealProcess: a URL group of n endpoints that all lead back to
// the group's own publish through proxies in front of the server, one publish that
// forwards the token ten levels deep with no retries: the server makes the group's n
// messages and refuses the n deliveries that come back (they carry Duraton-Hops), where
// it made n + n² + … + n⁸ before.
func TestGroupAmplificationRealProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	p := startDuraton(t, t.TempDir())
	client := newAPIClient(t, 10*time.Second)
	target, err := url.Parse(p.URL)
	require.NoError(t, err)
	const n = 5
	var eps []map[string]string
	for i := range n {
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		t.Cleanup(proxy.Close)
		eps = append(eps, map[string]string{"name": fmt.Sprintf("e%d", i), "url": proxy.URL + "/v2/publish/amp"})
	}
	raw, err := json.Marshal(map[string]any{"endpoints": eps})
	require.NoError(t, err)
	status, body := p.apiCall(t, client, http.MethodPost, "/v2/topics/amp/endpoints", string(raw))
	require.Equal(t, http.StatusOK, status, body)

	header := []string{"Upstash-Retries", "0"}
	for j := 1; j <= 10; j++ {
		header = append(header, strings.Repeat("Upstash-Forward-", j)+"Authorization", "Bearer "+p.Token)
	}
	status, body = p.apiCall(t, client, http.MethodPost, "/v2/publish/amp", "x", header...)
	require.Equal(t, http.StatusCreated, status, body)

	type logsPage struct {
		Events []struct {
			MessageID      string `json:"messageId"`
			State          string `json:"state"`
			ResponseStatus int    `json:"responseStatus"`
			ResponseBody   string `json:"responseBody"`
		} `json:"events"`
	}
	logs := func() logsPage {
		status, body := p.apiCall(t, client, http.MethodGet, "/v2/logs?count=1000", "")
		require.Equal(t, http.StatusOK, status, body)
		var page logsPage
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		return page
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		refused := 0
		for _, ev := range logs().Events {
			if ev.State == "FAILED" && ev.ResponseStatus == http.StatusBadRequest && strings.Contains(ev.ResponseBody, "may create one message") {
				refused++
			}
		}
		if refused == n {
			break
		}
		require.True(t, time.Now().Before(deadline), "the %d deliveries that came back were not all refused (%d were)", n, refused)
		time.Sleep(50 * time.Millisecond)
	}
	// Anything the refused deliveries could have made would be logged by now; a second
	// look a moment later finds nothing new.
	time.Sleep(500 * time.Millisecond)
	ids := map[string]bool{}
	for _, ev := range logs().Events {
		ids[ev.MessageID] = true
	}
	require.Len(t, ids, n, "one publish made the group's messages and nothing more")
	rss, peak := memOf(t, p.cmd.Process.Pid)
	t.Logf("messages made: %d; server RSS %d MB, peak %d MB", len(ids), rss>>20, peak>>20)
	require.Less(t, peak, int64(500<<20))
}

// TestEventFanOutRealProcess: an app of 1,000 throttled workflows all triggered by one
// event name. A request of 50 or 150 such events (50,000 and 150,000 runs) is refused
// whole with 413; requests of one event (1,000 runs) go through, several at once too
// (those over the project's in-flight budget are told to retry); the server's peak RSS
// stays under 500 MB through all of it.
func TestEventFanOutRealProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Upstash-Workflow-Sdk-Version", "1")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(endpoint.Close)
	p := startDuraton(t, t.TempDir())
	client := newAPIClient(t, 60*time.Second)
	var wfs []string
	for i := range 1000 {
		wfs = append(wfs, fmt.Sprintf(`{"name": "w%04d", "url": "%s/w", "triggers": [{"event": "fan"}], "throttle": {"limit": 1, "perMs": 3600000}}`, i, endpoint.URL))
	}
	status, body := p.apiCall(t, client, http.MethodPut, "/apps/fan", `{"workflows": [`+strings.Join(wfs, ",")+`]}`)
	require.Equal(t, http.StatusOK, status, body)

	events := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"name": "fan", "data": {"x": 1}},`, n), ",") + "]"
	}
	for _, n := range []int{50, 150} {
		status, body := p.apiCall(t, client, http.MethodPost, "/events", events(n))
		require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
		require.Contains(t, body, fmt.Sprintf("up to %d workflow runs", n*1000))
	}
	started := 0
	for range 5 {
		status, body := p.apiCall(t, client, http.MethodPost, "/events", events(1))
		require.Equal(t, http.StatusOK, status, body)
		started += 1000
	}
	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, 4)
	for range 4 {
		go func() {
			status, body := p.apiCall(t, client, http.MethodPost, "/events", events(1))
			answers <- answer{status, body}
		}()
	}
	// A publish meanwhile waits for at most the commits in progress, not for a fan-out
	// of every event at once.
	began := time.Now()
	status, body = p.apiCall(t, client, http.MethodPost, "/v2/publish/"+endpoint.URL+"/plain", "x")
	publishTook := time.Since(began)
	require.Equal(t, http.StatusCreated, status, body)
	for range 4 {
		a := <-answers
		switch a.status {
		case http.StatusOK:
			started += 1000
		case http.StatusTooManyRequests:
			require.Contains(t, a.body, "the limit in flight is 2000")
		default:
			t.Fatalf("POST /events answered %d: %s", a.status, a.body)
		}
	}
	status, body = p.apiCall(t, client, http.MethodGet, "/runs/stats", "")
	require.Equal(t, http.StatusOK, status, body)
	rss, peak := memOf(t, p.cmd.Process.Pid)
	t.Logf("runs started: %d; a publish during the fan-outs took %s; server RSS %d MB, peak %d MB", started, publishTook.Round(time.Millisecond), rss>>20, peak>>20)
	require.Less(t, peak, int64(500<<20))
}
