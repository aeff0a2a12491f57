package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A forwarded header value with a control character is refused on every route that
// takes forwarded headers, never accepted to fail at every attempt: as a real header
// by Go's HTTP server itself (the same rule as the sender's), inside a JSON body by the
// API, with a 400 that names the header.
func TestControlCharacterInForwardedHeaderIsRefused(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/never")

	for _, path := range []string{"/v2/publish/" + dest, "/v2/enqueue/q/" + dest, "/v2/schedules/" + dest, "/v2/trigger/" + dest} {
		c, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
		require.NoError(t, err)
		_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nUpstash-Cron: * * * * *\r\nUpstash-Forward-X-Note: a\x01b\r\nContent-Length: 1\r\n\r\nx", path, env.Token)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, c.Close())
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
	}

	require.Empty(t, env.logs(t, "").Events, "nothing was stored")
	require.Empty(t, decodeJSON[[]scheduleView](t, env.call(t, http.MethodGet, "/v2/schedules", nil)))
	require.Empty(t, env.Endpoint.all(), "nothing was delivered")

	// A wait's timeout headers: the run waits, with headers its timeout could not send.
	const runID = "wfr_hdr"
	ep := newSDKEndpoint(t)
	wfURL := ep.URL("/wf")
	ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
	body := fmt.Appendf(nil, `{"url":%q,"timeout":"1h","timeoutUrl":%q,"timeoutHeaders":{"Upstash-Workflow-RunId":[%q],"Upstash-Forward-X-Note":["a\u0001b"]},"step":{"stepId":1,"stepType":"Wait","stepName":"w","concurrent":1}}`, wfURL, wfURL, runID)
	r := env.call(t, http.MethodPost, "/v2/wait/evt_hdr", body, waitHeaders(runID, wfURL)...)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "timeoutHeaders: header Upstash-Forward-X-Note: value has the control character 0x01")
	r = env.call(t, http.MethodGet, "/v2/waiters/evt_hdr", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.JSONEq(t, `[]`, string(r.Body), "no waiter was registered")
}
