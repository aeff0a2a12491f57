package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestFollowerStalledBodiesBounded: connections to a follower each declare a body and
// send all of it but 1 KiB, then stall: 100 publishes of 1 MiB (the --max-body-bytes
// default) and 20 batches of 16 MiB without a token, then 100 batches of 16 MiB with
// one. The follower holds at most --follower-buffer-bytes of them, a quarter for callers
// without a valid token (the others are refused at once with 503, a declared length over
// the route's limit with 413), stays responsive, and its RSS stays bounded.
func TestFollowerStalledBodiesBounded(t *testing.T) {
	skipShortReplicas(t)
	// Not parallel: its 120 MiB of traffic would disturb the timing of the other tests.
	db := pgtest.Start(t).NewDatabase(t)
	reps, leader := startReplicas(t, db, newReplicaCreds(), 2)
	follower := followers(reps, leader)[0]
	addr := strings.TrimPrefix(follower.URL, "http://")
	rssBefore, _ := memOf(t, follower.cmd.Process.Pid)

	// stallAll opens n connections that each declare length bytes for path and send all
	// but 1 KiB, with the token when withToken; it returns the statuses answered within a
	// second (0: none yet, held).
	stallAll := func(n int, path string, length int, withToken bool) []int {
		auth := ""
		if withToken {
			auth = "Authorization: Bearer " + follower.Token + "\r\n"
		}
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			conn, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, addr, auth, length); err != nil {
					return
				}
				chunk := []byte(strings.Repeat("x", 64<<10))
				for left := length - 1<<10; left > 0; left -= len(chunk) {
					if _, err := conn.Write(chunk[:min(len(chunk), left)]); err != nil {
						break // refused: the follower closed the connection
					}
				}
				_ = conn.SetReadDeadline(time.Now().Add(time.Second))
				if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
					statuses[i] = resp.StatusCode
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		return statuses
	}
	count := func(statuses []int) map[int]int {
		out := map[int]int{}
		for _, s := range statuses {
			out[s]++
		}
		return out
	}

	anonPublishes := count(stallAll(100, "/v2/publish/http://127.0.0.1:9/x", 1<<20, false))
	anonBatches := count(stallAll(20, "/v2/batch", 16<<20, false))
	rssAnon, _ := memOf(t, follower.cmd.Process.Pid)
	batches := count(stallAll(100, "/v2/batch", 16<<20, true))
	oversized := count(stallAll(10, "/v2/publish/http://127.0.0.1:9/x", 2<<20, true))
	rss, peak := memOf(t, follower.cmd.Process.Pid)
	t.Logf("follower RSS: %d MB before; %d MB with 100 stalled 1 MiB publishes without a token (answers %v; 0 = held) and 20 16 MiB batches without one (%v); "+
		"%d MB after 100 stalled 16 MiB batches with the token too (%v), peak %d MB; 2 MiB publishes answered %v",
		rssBefore>>20, rssAnon>>20, anonPublishes, anonBatches, rss>>20, batches, peak>>20, oversized)
	require.Equal(t, map[int]int{0: 32, http.StatusServiceUnavailable: 68}, anonPublishes, "a quarter of the 128 MiB budget for callers without a token")
	require.Equal(t, map[int]int{http.StatusRequestEntityTooLarge: 20}, anonBatches, "without a token, 1 MiB on every route")
	require.Equal(t, map[int]int{0: 6, http.StatusServiceUnavailable: 94}, batches, "96 MiB for token holders")
	require.Equal(t, map[int]int{http.StatusRequestEntityTooLarge: 10}, oversized)
	require.Less(t, peak, int64(400<<20), "the follower's memory is bounded by its budget")

	status, body := get(t, follower.URL+"/healthz", "")
	require.Equal(t, http.StatusOK, status, body)
}
