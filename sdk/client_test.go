package sdk

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordedRequest is one request the fake API received.
type recordedRequest struct {
	Method     string
	RequestURI string // path and query exactly as sent
	Header     http.Header
	Body       []byte
}

// apiFake is a stand-in for the Duraton API: it records every request and answers each
// with status and body.
type apiFake struct {
	mu     sync.Mutex
	reqs   []recordedRequest
	status int
	body   string
}

func (f *apiFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recordedRequest{Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Body: body})
	status, answer := f.status, f.body
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// last returns the last request received, failing the test when there is none.
func (f *apiFake) last(t *testing.T) recordedRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.reqs, "no request reached the fake API")
	return f.reqs[len(f.reqs)-1]
}

// newClientWithFake starts a fake API answering status and body and returns a Client for
// it with token "tok".
func newClientWithFake(t *testing.T, status int, body string) (*Client, *apiFake) {
	t.Helper()
	fake := &apiFake{status: status, body: body}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := NewClient(WithBaseURL(srv.URL+"/"), WithToken("tok"), WithHTTPClient(srv.Client()),
		WithEnv(func(string) string { return "" }))
	require.NoError(t, err)
	return c, fake
}

func TestNewClient(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c, err := NewClient(WithEnv(func(string) string { return "" }))
		require.NoError(t, err)
		require.Equal(t, DefaultBaseURL, c.BaseURL())
		require.Empty(t, c.token)
	})

	t.Run("Environment", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"QSTASH_URL": "http://duraton.local:9000/", "QSTASH_TOKEN": "env-token"}
		c, err := NewClient(WithEnv(func(k string) string { return env[k] }))
		require.NoError(t, err)
		require.Equal(t, "http://duraton.local:9000", c.BaseURL())
		require.Equal(t, "env-token", c.token)
	})

	t.Run("DuratonEnvironmentFirst", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"DURATON_URL": "http://duraton.local:7000", "DURATON_TOKEN": "d-token",
			"QSTASH_URL": "http://qstash.local:9000", "QSTASH_TOKEN": "q-token"}
		c, err := NewClient(WithEnv(func(k string) string { return env[k] }))
		require.NoError(t, err)
		require.Equal(t, "http://duraton.local:7000", c.BaseURL())
		require.Equal(t, "d-token", c.token)
		only := map[string]string{"DURATON_URL": "http://duraton.local:7000", "DURATON_TOKEN": "d-token"}
		c, err = NewClient(WithEnv(func(k string) string { return only[k] }))
		require.NoError(t, err)
		require.Equal(t, "http://duraton.local:7000", c.BaseURL(), "DURATON_URL alone is enough")
		require.Equal(t, "d-token", c.token)
	})

	t.Run("OptionsWinOverEnvironment", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"QSTASH_URL": "http://env:1", "QSTASH_TOKEN": "env-token"}
		c, err := NewClient(WithEnv(func(k string) string { return env[k] }), WithBaseURL("https://opt:2"), WithToken("opt-token"))
		require.NoError(t, err)
		require.Equal(t, "https://opt:2", c.BaseURL())
		require.Equal(t, "opt-token", c.token)
	})

	t.Run("RejectsBadBaseURL", func(t *testing.T) {
		t.Parallel()
		for _, bad := range []string{"127.0.0.1:8080", "ftp://x", "http://", "::"} {
			_, err := NewClient(WithBaseURL(bad))
			require.Error(t, err, bad)
		}
	})
}

func TestClientErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		status  int
		body    string
		message string
	}{
		{"JSONError", http.StatusNotFound, `{"error":"message \"msg_1\" not found"}`, `message "msg_1" not found`},
		{"TextBody", http.StatusBadGateway, "upstream down\n", "upstream down"},
		{"EmptyBody", http.StatusTooManyRequests, "", "Too Many Requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, fake := newClientWithFake(t, tt.status, tt.body)
			_, err := c.Message(context.Background(), "msg_1")
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tt.status, apiErr.Status)
			require.Equal(t, tt.message, apiErr.Message)
			require.Equal(t, tt.status == http.StatusNotFound, IsNotFound(err))
			require.Equal(t, "Bearer tok", fake.last(t).Header.Get("Authorization"))
		})
	}

	t.Run("BadJSONAnswer", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusOK, "not json")
		_, err := c.Message(context.Background(), "msg_1")
		require.ErrorContains(t, err, "decode answer")
		require.False(t, IsNotFound(err))
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusOK, "{}")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Message(ctx, "msg_1")
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("MissingArguments", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusOK, "{}")
		ctx := context.Background()
		_, err := c.Publish(ctx, PublishRequest{})
		require.Error(t, err)
		_, err = c.CancelMessages(ctx, CancelMessagesRequest{})
		require.ErrorContains(t, err, "set All")
		_, err = c.Cancel(ctx, CancelRequest{Count: 5})
		require.ErrorContains(t, err, "set All")
		_, err = c.DeleteDLQ(ctx)
		require.Error(t, err)
		_, err = c.ResumeRuns(ctx)
		require.Error(t, err)
		_, err = c.Publish(ctx, PublishRequest{URL: "http://x", FlowControl: &FlowControl{Key: "k"}})
		require.ErrorContains(t, err, "parallelism or rate")
		fake.mu.Lock()
		defer fake.mu.Unlock()
		require.Empty(t, fake.reqs, "invalid calls must not reach the server")
	})
}

func TestAPIErrorIsMatchable(t *testing.T) {
	t.Parallel()
	var err error = &APIError{Status: http.StatusNotFound, Message: "gone"}
	wrapped := errors.Join(errors.New("context"), err)
	require.True(t, IsNotFound(wrapped))
	require.Equal(t, "duraton: 404 Not Found: gone", err.Error())
}
