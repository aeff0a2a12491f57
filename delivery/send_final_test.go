package delivery

import (
	"bufio"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// cutShortEndpoint answers every request on a real loopback socket with a 2xx that
// promises 100 bytes and closes after 3: an answer cut short. It counts the attempts.
func cutShortEndpoint(t *testing.T) (url string, attempts *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	attempts = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				attempts.Add(1)
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: application/json\r\n\r\n{\"r"))
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/step", attempts
}

// A 2xx whose body is cut short is a failed attempt: retried, and dead-lettered when the
// retries are used up, never recorded as delivered (a workflow step's result would be
// lost).
func TestCutShortAnswerIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	url, attempts := cutShortEndpoint(t)
	id := b.publish(t, &Message{URL: url, Body: []byte("x"), Retries: 1, RetryDelay: "10"})
	events := b.waitRecorded(t, id, StateFailed)
	for _, ev := range events {
		require.NotEqual(t, StateDelivered, ev.state, "a cut-short answer is not a delivery")
	}
	require.Equal(t, int64(2), attempts.Load(), "the first attempt and its one retry")
	entries, _, err := b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Contains(t, entries[0].Response.Error, "cut short")
}

// A message whose forwarded header the sender cannot send (stored before the API
// refused such values) fails for good on its first attempt, to the dead-letter queue
// and its failure callback, instead of failing every retry locally.
func TestUnsendableHeaderIsAFinalFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, nil)
	id := b.publish(t, &Message{URL: ep.url("/never"), Body: []byte("x"), Retries: 5, RetryDelay: "10",
		Header:          map[string][]string{"X-Note": {"a\x01b"}},
		FailureCallback: &CallbackSpec{URL: ep.url("/failed"), Method: "POST"}})
	b.waitRecorded(t, id, StateFailed)
	ep.waitRequests(t, "/failed", 1)
	require.Empty(t, ep.requests("/never"), "nothing can be sent")
	entries, _, err := b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Contains(t, entries[0].Response.Error, "header X-Note")
	require.Zero(t, entries[0].Message.Retried, "no retry was spent on it")
}
