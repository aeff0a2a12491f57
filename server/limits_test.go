package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// headerBytes is the summed size of a header map's names and values.
func headerBytes(h map[string][]string) int {
	n := 0
	for k, vs := range h {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// An endpoint that answers with hundreds of kilobytes of headers does not get them stored
// in every log event, DLQ entry and callback (issue 14, finding 3).
func TestStoredResponseHeadersAreCapped(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 800 {
			w.Header().Set(fmt.Sprintf("X-Junk-%03d", i), strings.Repeat("j", 1000))
		}
		w.Header().Set("X-Reason", "full")
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(big.Close)
	cb := newRecorder(t)

	id := env.publish(t, big.URL+"/fail", []byte("x"), "Upstash-Retries", "0", "Upstash-Callback", cb.URL("/cb"), "Upstash-Failure-Callback", cb.URL("/fcb"))
	var entry wire.DLQMessage
	eventually(t, "the dead letter", func() bool {
		r := env.call(t, http.MethodGet, "/v2/dlq", nil)
		require.Equal(t, http.StatusOK, r.Status)
		res := decodeJSON[wire.DLQPage](t, r)
		if len(res.Messages) == 0 {
			return false
		}
		entry = res.Messages[0]
		return true
	})
	require.Equal(t, id, entry.MessageID)
	require.LessOrEqual(t, len(entry.ResponseHeader), 64)
	require.LessOrEqual(t, headerBytes(entry.ResponseHeader), 16<<10)
	require.Equal(t, []string{"full"}, entry.ResponseHeader["X-Reason"], "a small header is kept")

	logs := env.logs(t, "messageIds="+id)
	for _, ev := range logs.Events {
		require.LessOrEqual(t, len(ev.ResponseHeader), 64, ev.State)
		require.LessOrEqual(t, headerBytes(ev.ResponseHeader), 16<<10, ev.State)
	}
	for _, q := range cb.waitN(t, 2, func(recorded) bool { return true }) {
		require.Less(t, len(q.Body), 64<<10, "callback %s carries the capped headers", q.URL)
	}
}

// A page of a listing stays within a byte budget however large its records are; the
// cursor leads to the rest (issue 14, finding 3).
func TestListPagesHaveAByteBudget(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	fail := newRecorder(t)
	body := []byte(strings.Repeat("b", 900<<10))
	const n = 8
	for range n {
		env.publish(t, fail.URL("/fail"), body, "Upstash-Retries", "0")
	}
	// walk reads every page and returns how many dead letters and pages it saw.
	walk := func() (seen, pages int) {
		cursor := ""
		for {
			path := "/v2/dlq?count=100"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := env.call(t, http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, r.Status)
			require.Less(t, len(r.Body), 6<<20, "page %d is %d bytes", pages, len(r.Body))
			res := decodeJSON[wire.DLQPage](t, r)
			seen += len(res.Messages)
			pages++
			if cursor = res.Cursor; cursor == "" {
				return seen, pages
			}
		}
	}
	var seen, pages int
	eventually(t, "all dead letters", func() bool {
		seen, pages = walk()
		return seen >= n
	})
	require.Equal(t, n, seen, "every dead letter is reachable through the cursor")
	require.Greater(t, pages, 1)
}
