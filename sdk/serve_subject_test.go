package sdk_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/sdk/wire"
)

const (
	subjectTestCurrent = "sig_subject_test_current_key_0123456789"
	subjectTestNext    = "sig_subject_test_next_key_9876543210ab"
)

// signedDelivery builds a workflow delivery to reqURL whose signature names signedFor.
func signedDelivery(t *testing.T, reqURL, signedFor, jti string) *http.Request {
	t.Helper()
	body := []byte(`[]`)
	tok, err := wire.Sign(subjectTestCurrent, wire.NewClaims(signedFor, body, time.Now(), jti))
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, reqURL, bytes.NewReader(body))
	r.Header.Set("Upstash-Signature", tok)
	r.Header.Set("Upstash-Workflow-Sdk-Version", "1")
	r.Header.Set("Upstash-Workflow-RunId", "wfr_subject")
	return r
}

// verifyFailure serves r with opts and returns the message when verification failed, ""
// when it passed (what follows fails for other reasons: no Duraton is running).
func verifyFailure(t *testing.T, h http.Handler, r *http.Request) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if msg := rec.Body.String(); strings.Contains(msg, "failed to verify") {
		return msg
	}
	return ""
}

func subjectHandler(opts ...sdk.ServeOption) http.Handler {
	env := map[string]string{
		"QSTASH_URL": "http://127.0.0.1:1", "QSTASH_TOKEN": "t",
		"QSTASH_CURRENT_SIGNING_KEY": subjectTestCurrent, "QSTASH_NEXT_SIGNING_KEY": subjectTestNext,
	}
	route := func(c *sdk.Context) (any, error) { return nil, nil }
	return sdk.Serve(route, append([]sdk.ServeOption{sdk.WithServeEnv(func(k string) string { return env[k] })}, opts...)...)
}

// TestServeChecksSubject: a delivery signed for one endpoint is refused at another that
// shares the signing keys.
func TestServeChecksSubject(t *testing.T) {
	t.Parallel()
	h := subjectHandler()
	msg := verifyFailure(t, h, signedDelivery(t, "http://app.example/api/transfer", "http://app.example/api/newsletter", "j1"))
	require.Contains(t, msg, "signature subject does not match")
	require.Empty(t, verifyFailure(t, h, signedDelivery(t, "http://app.example/api/transfer", "http://app.example/api/transfer", "j2")))
	require.Empty(t, verifyFailure(t, h, signedDelivery(t, "http://app.example/api/transfer?b=2&a=1", "HTTP://APP.example:80/api/transfer?a=1&b=2", "j3")),
		"scheme and host case, the default port and the query order do not matter")
}
