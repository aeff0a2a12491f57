package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// TestLowSeverityValidation: inputs the security review found accepted (or answered with
// a 500) are now a 400 that names the field, and change nothing.
func TestLowSeverityValidation(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/v")
	bad := func(t *testing.T, r apiResponse, wantInError string) {
		t.Helper()
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), wantInError)
	}

	t.Run("EventIDs", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("e", 40<<10)
		for _, call := range []struct{ method, path string }{
			{http.MethodPost, "/v2/notify/" + long},
			{http.MethodPost, "/v2/notify/wfr_x/" + long},
			{http.MethodGet, "/v2/waiters/" + long},
			{http.MethodPost, "/v2/wait/" + long},
			{http.MethodPost, "/v2/notify/a%0Ab"},
		} {
			bad(t, env.call(t, call.method, call.path, []byte("{}")), "eventId")
		}
	})

	t.Run("NotBeforeOverflow", func(t *testing.T) {
		t.Parallel()
		r := env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"), "Upstash-Not-Before", "9223372036854775807")
		bad(t, r, "Upstash-Not-Before")
	})

	t.Run("BatchHeaderCRLF", func(t *testing.T) {
		t.Parallel()
		body := fmt.Appendf(nil, `[{"destination":%q,"headers":{"content-type":"text/plain\r\nX-Evil: 1"},"body":"x"}]`, dest)
		bad(t, env.call(t, http.MethodPost, "/v2/batch", body), "batch[0]")
	})

	t.Run("PortOutOfRange", func(t *testing.T) {
		t.Parallel()
		bad(t, env.call(t, http.MethodPost, "/v2/publish/http://127.0.0.1:99999/x", []byte("x")), "port 99999")
	})

	t.Run("TimeoutBelowOneSecond", func(t *testing.T) {
		t.Parallel()
		bad(t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"), "Upstash-Timeout", "1ns"), "Upstash-Timeout")
	})

	t.Run("DuplicateFlowControlItem", func(t *testing.T) {
		t.Parallel()
		r := env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"),
			"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "parallelism=1, parallelism=5")
		bad(t, r, "parallelism more than once")
	})

	t.Run("CronOnPublish", func(t *testing.T) {
		t.Parallel()
		bad(t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"), "Upstash-Cron", "* * * * *"), "Upstash-Cron")
	})

	t.Run("LowerCaseBearer", func(t *testing.T) {
		t.Parallel()
		req := env.request(t, http.MethodGet, "/v2/queues", nil)
		req.Header.Set("Authorization", "bearer "+env.Token)
		require.Equal(t, http.StatusOK, env.send(t, req).Status)
	})

	t.Run("WaitNamesTimeoutURL", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait_bad_timeout_url"
		body := fmt.Appendf(nil, `{"url":%q,"timeout":90,"timeoutUrl":"ftp://nowhere","step":{"stepId":1,"stepType":"Wait","stepName":"n","concurrent":1}}`, dest)
		r := env.call(t, http.MethodPost, "/v2/wait/evt_bad_url", body, waitHeaders(runID, dest)...)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.True(t, strings.HasPrefix(r.errorMessage(t), "timeoutUrl:"), r.errorMessage(t))
	})

	t.Run("FlowControlListPages", func(t *testing.T) {
		t.Parallel()
		other := env.withProject(t, "fcpages", "fcpages-token-0123456789abcdefghijklmnop")
		for _, k := range []string{"k1", "k2", "k3"} {
			require.Equal(t, http.StatusOK, other.call(t, http.MethodPost, "/v2/flowControl/"+k+"/pause", nil).Status)
		}
		r := other.call(t, http.MethodGet, "/v2/flowControl?count=2", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		page := decodeJSON[[]wire.FlowControlInfo](t, r)
		require.Len(t, page, 2)
		require.Equal(t, "k2", r.Header.Get(headerNextCursor))
		r = other.call(t, http.MethodGet, "/v2/flowControl?count=2&cursor=k2", nil)
		page = decodeJSON[[]wire.FlowControlInfo](t, r)
		require.Len(t, page, 1)
		require.Equal(t, "k3", page[0].Key)
		require.Empty(t, r.Header.Get(headerNextCursor))
	})
}
