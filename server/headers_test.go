package server

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/netguard"
)

func testParser(allowLoopback bool) messageParser {
	p := netguard.Policy{}
	if allowLoopback {
		p.Allow = netguard.LoopbackPrefixes()
	}
	return messageParser{
		limits:       publishLimits{maxRetries: 100, maxTimeout: 15 * time.Minute, maxDelay: 365 * 24 * time.Hour},
		destinations: p.CheckURL,
		now:          time.Unix(1_700_000_000, 0),
	}
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseMessageHeaders(t *testing.T) {
	t.Parallel()
	p := testParser(true)
	m, err := p.parse(headers(
		"Upstash-Method", "put",
		"Upstash-Retries", "0",
		"Upstash-Retry-Delay", "1000 * (1 + retried)",
		"Upstash-Timeout", "30",
		"Upstash-Delay", "1d10h30m",
		"Upstash-Label", "a,b-c",
		"Upstash-Deduplication-Id", "dup",
		"Upstash-Flow-Control-Key", "vendor",
		"Upstash-Flow-Control-Value", "parallelism=2, rate=5, period=1s",
		"upstash-forward-x-a", "1",
		"Upstash-Forward-Host", "evil.example", // hop-by-hop: dropped, not an error
		"Upstash-Forward-Content-Length", "3",
		"Upstash-Forward-Upstash-Signature", "forged", // set by Duraton: dropped
		"Upstash-Forward-Duraton-Inline", "1024", // the offer is Duraton's (the TS SDK forwards it): dropped
		"Upstash-Forward-User-Agent", "curl/8",
		"Content-Type", "application/json",
		"Upstash-Callback", "http://127.0.0.1:9/cb",
		"Upstash-Callback-Retries", "1",
		"Upstash-Callback-Forward-X-Cb", "yes",
		"Upstash-Failure-Callback", "http://127.0.0.1:9/fail",
		"Upstash-Failure-Callback-Method", "PATCH",
		"Upstash-Telemetry-Sdk", "x, y",
	), "http://127.0.0.1:9/dest?q=1")
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9/dest?q=1", m.URL)
	require.Equal(t, "PUT", m.Method)
	require.Equal(t, 0, m.Retries)
	require.Equal(t, "1000 * (1 + retried)", m.RetryDelay)
	require.EqualValues(t, 30_000, m.TimeoutMs)
	require.Equal(t, time.Unix(1_700_000_000, 0).Add(34*time.Hour+30*time.Minute).UnixMilli(), m.NotBefore)
	require.Equal(t, []string{"a", "b-c"}, m.Labels)
	require.Equal(t, "id:dup", m.DedupID)
	require.Equal(t, "vendor", m.FlowControl.Key)
	require.Equal(t, map[string][]string{"X-A": {"1"}, "Content-Type": {"application/json"}}, m.Header)
	require.Equal(t, "http://127.0.0.1:9/cb", m.Callback.URL)
	require.Equal(t, 1, m.Callback.Retries)
	require.Equal(t, map[string][]string{"X-Cb": {"yes"}}, m.Callback.Header)
	require.Equal(t, "PATCH", m.FailureCallback.Method)
	require.Equal(t, 3, m.FailureCallback.Retries, "a callback's retries default to 3")
}

func TestParseNotBeforeWinsOverDelay(t *testing.T) {
	t.Parallel()
	m, err := testParser(true).parse(headers("Upstash-Delay", "10s", "Upstash-Not-Before", "1700000100"), "http://127.0.0.1:9/x")
	require.NoError(t, err)
	require.EqualValues(t, 1_700_000_100_000, m.NotBefore)
}

func TestParseRejectsBadHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		h       http.Header
		dest    string
		status  int
		wantErr string
	}{
		{"Delay", headers("Upstash-Delay", "banana"), "", 400, "Upstash-Delay"},
		{"DelayTooLong", headers("Upstash-Delay", "400d"), "", 400, "Upstash-Delay"},
		{"NotBefore", headers("Upstash-Not-Before", "soon"), "", 400, "Upstash-Not-Before"},
		{"RetriesNegative", headers("Upstash-Retries", "-1"), "", 400, "Upstash-Retries"},
		{"RetriesOverLimit", headers("Upstash-Retries", "101"), "", 412, "exceeds the maximum of 100"},
		{"RetryDelay", headers("Upstash-Retry-Delay", "1000 * bogus"), "", 400, "Upstash-Retry-Delay"},
		{"Timeout", headers("Upstash-Timeout", "-5s"), "", 400, "Upstash-Timeout"},
		{"TimeoutTooLong", headers("Upstash-Timeout", "2h"), "", 400, "exceeds the maximum"},
		{"Method", headers("Upstash-Method", "BREW"), "", 400, "Upstash-Method"},
		{"Label", headers("Upstash-Label", "ok,not ok"), "", 400, "Upstash-Label"},
		{"FlowControlValue", headers("Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "parallelism=x"), "", 400, "parallelism"},
		{"FlowControlKeyMissing", headers("Upstash-Flow-Control-Value", "rate=1"), "", 400, "Upstash-Flow-Control-Key is required"},
		{"ForwardValueCRLF", headers("Upstash-Forward-X-A", "a\r\nInjected: 1"), "", 400, "control character 0x0d"},
		{"CallbackNested", headers("Upstash-Callback", "http://127.0.0.1:9/cb", "Upstash-Callback-Retries", "x"), "", 400, "Upstash-Callback-Retries"},
		{"CallbackURL", headers("Upstash-Callback", "ftp://x"), "", 400, "Upstash-Callback"},
		{"DestinationScheme", nil, "ftp://example.com/x", 400, "destination"},
		{"DestinationNotURL", nil, "not-a-url", 400, "destination"},
		{"DestinationUserinfo", nil, "http://user:pw@example.com/", 400, "destination"},
		{"DestinationEmpty", nil, " ", 400, "destination"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dest := tt.dest
			if dest == "" {
				dest = "http://127.0.0.1:9/x"
			}
			_, err := testParser(true).parse(tt.h, strings.TrimSpace(dest))
			var api *apiError
			require.True(t, errors.As(err, &api), "got %v", err)
			require.Equal(t, tt.status, api.status)
			require.Contains(t, api.msg, tt.wantErr)
		})
	}
}

func TestParseRefusesPrivateDestinationsOutsideDev(t *testing.T) {
	t.Parallel()
	for _, dest := range []string{"http://127.0.0.1/x", "http://10.0.0.1/x", "http://169.254.169.254/latest", "http://[::1]/x", "http://127.1/x"} {
		_, err := testParser(false).parse(nil, dest)
		require.Error(t, err, dest)
	}
	_, err := testParser(false).parse(headers("Upstash-Callback", "http://192.168.1.1/cb"), "https://example.com/x")
	require.ErrorContains(t, err, "Upstash-Callback")
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "10s": 10 * time.Second, "2m": 2 * time.Minute, "1d": 24 * time.Hour, "1d10h30m": 34*time.Hour + 30*time.Minute, "500ms": 500 * time.Millisecond} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "1x", "-d", "999999999999"} {
		_, err := parseDuration(in)
		require.Error(t, err, in)
	}
}

func TestRawDestinationKeepsQueryAndDoubleSlash(t *testing.T) {
	t.Parallel()
	r := &http.Request{RequestURI: "/v2/publish/http://127.0.0.1:3000/a//b?x=1&y=%20z", URL: &url.URL{}}
	require.Equal(t, "http://127.0.0.1:3000/a//b?x=1&y=%20z", rawDestination(r, "/v2/publish/"))
	r = &http.Request{RequestURI: "/v2/publish/https%3A%2F%2Fexample.com%2Fx", URL: &url.URL{}}
	require.Equal(t, "https://example.com/x", rawDestination(r, "/v2/publish/"))
}

// FuzzParseHeaders: no header value may panic the parser, and anything it accepts is
// within the limits.
func FuzzParseHeaders(f *testing.F) {
	f.Add("10s", "3", "1000*retried", "30", "a,b", "parallelism=1", "x")
	f.Add("1d10h30m", "0", "pow(2, retried)", "2m", "", "rate=5,period=1m", "\r\n")
	f.Fuzz(func(t *testing.T, delay, retries, retryDelay, timeout, label, fcValue, fwd string) {
		h := headers("Upstash-Delay", delay, "Upstash-Retries", retries, "Upstash-Retry-Delay", retryDelay,
			"Upstash-Timeout", timeout, "Upstash-Label", label, "Upstash-Flow-Control-Key", "k",
			"Upstash-Flow-Control-Value", fcValue, "Upstash-Forward-X-F", fwd)
		p := testParser(true)
		m, err := p.parse(h, "http://127.0.0.1:9/x")
		if err != nil {
			var api *apiError
			if !errors.As(err, &api) || api.status < 400 || api.status > 499 {
				t.Fatalf("parse error is not a 4xx apiError: %v", err)
			}
			return
		}
		if m.Retries < 0 || m.Retries > p.limits.maxRetries || m.TimeoutMs < 0 || m.TimeoutMs > p.limits.maxTimeout.Milliseconds() {
			t.Fatalf("accepted out-of-range message: %+v", m)
		}
		if strings.ContainsAny(strings.Join(m.Header["X-F"], ""), "\r\n\x00") {
			t.Fatalf("accepted a forwarded value with CR/LF/NUL")
		}
	})
}

// isToken is RFC 9110's token, byte for byte the regexp it replaced.
func TestIsTokenMatchesTheGrammar(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		require.Equal(t, re.MatchString(s), isToken(s), "byte %#x", c)
	}
	for _, s := range []string{"", "X-Custom", "Content-Type", "a b", "x:y", "ok~!"} {
		require.Equal(t, re.MatchString(s), isToken(s), "%q", s)
	}
}
