package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCrashRecoveryNoAckedMessageLost proves the durability promise of publish: a message
// whose publish was answered 200/201 survives a SIGKILL of the server in the middle of the
// load and is delivered after a restart on the same data directory. Duplicates are allowed
// (at-least-once) and only reported; loss is a failure.
// It runs with the default checkpoint size and with checkpoints every 8 KiB of
// write-ahead log, so that the kill lands among checkpoints too (a segment being
// checkpointed, one just deleted) and the restart replays one or two segments.
func TestCrashRecoveryNoAckedMessageLost(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	t.Run("DefaultCheckpoints", func(t *testing.T) { crashRecoveryNoAckedMessageLost(t) })
	t.Run("Checkpoints8KiB", func(t *testing.T) { crashRecoveryNoAckedMessageLost(t, "--checkpoint-bytes", "8192") })
}

func crashRecoveryNoAckedMessageLost(t *testing.T, flags ...string) {
	const (
		total         = 3000             // ids offered to the publishers
		publishers    = 16               // concurrent publishing goroutines
		killAfterAcks = 1000             // SIGKILL once this many publishes were acknowledged
		deliverWithin = 60 * time.Second // after the restart, for every acknowledged id
	)
	runTag := fmt.Sprintf("%x", time.Now().UnixNano())

	// The destination: records how often each body (a unique id) arrived.
	var (
		recvMu   sync.Mutex
		received = map[string]int{}
	)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		recvMu.Lock()
		received[string(b)]++
		recvMu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(endpoint.Close) // registered first, so it closes after duraton stopped
	dest := endpoint.URL + "/crash"

	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, "127.0.0.1:0", flags...)
	client := newAPIClient(t, 10*time.Second)

	var (
		next    atomic.Int64
		killed  atomic.Bool
		ackMu   sync.Mutex
		acked   = map[string]string{} // id → messageId, publish answered 200/201
		ackList []string              // ids in the order their publish was acknowledged
		errMu   sync.Mutex
		errs    []string // publish failures while the server was supposed to be healthy
		killNow = make(chan struct{})
		wg      sync.WaitGroup
	)
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > total {
					return
				}
				id := fmt.Sprintf("crash-%s-%05d", runTag, n)
				msgID, err := publishText(client, p1, dest, id)
				if err == nil {
					ackMu.Lock()
					acked[id] = msgID
					ackList = append(ackList, id)
					if len(ackList) == killAfterAcks {
						close(killNow)
					}
					ackMu.Unlock()
					continue
				}
				if killed.Load() {
					return // the server is gone: this id was never acknowledged, so it is not owed
				}
				errMu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", id, err))
				errMu.Unlock()
			}
		}()
	}

	select {
	case <-killNow:
	case <-time.After(60 * time.Second):
		killed.Store(true) // let the publishers stop; the test fails below
		p1.Kill()
		wg.Wait()
		t.Fatalf("only %d of %d publishes acknowledged within 60s; errors: %v", len(ackList), killAfterAcks, firstN(errs, 5))
	}
	killed.Store(true)
	p1.Kill()
	wg.Wait()

	ackMu.Lock()
	ackedCount := len(acked)
	ackMu.Unlock()
	require.Empty(t, errs, "publishes failed before the kill (first 5 of %d): %v", len(errs), firstN(errs, 5))
	require.Less(t, ackedCount, total, "every publish was acknowledged before the kill took effect: not a mid-load crash")
	t.Logf("killed duraton with SIGKILL after %d of %d publishes were acknowledged", ackedCount, total)

	p2 := startDuratonAddr(t, dataDir, "127.0.0.1:0", flags...)
	if p2.Token != p1.Token || p2.CurrentSigningKey != p1.CurrentSigningKey {
		t.Logf("note: the restarted server prints a different token or signing key than before the crash")
	}

	missing := func() []string {
		recvMu.Lock()
		defer recvMu.Unlock()
		var out []string
		for id := range acked {
			if received[id] == 0 {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	deadline := time.Now().Add(deliverWithin)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if lost := missing(); len(lost) > 0 {
		for _, id := range firstN(lost, 5) {
			status, body := getMessage(t, client, p2, acked[id])
			t.Logf("lost %s (messageId %s): GET /v2/messages/%s on the restarted server → %d %s",
				id, acked[id], acked[id], status, strings.TrimSpace(body))
		}
		t.Fatalf("%d of %d acknowledged messages were never delivered within %s after the restart (first: %v)",
			len(lost), ackedCount, deliverWithin, firstN(lost, 10))
	}

	recvMu.Lock()
	duplicates, unackedDelivered := 0, 0
	for id, n := range received {
		if n > 1 {
			duplicates += n - 1
		}
		if _, ok := acked[id]; !ok && strings.HasPrefix(id, "crash-"+runTag) {
			unackedDelivered++
		}
	}
	recvMu.Unlock()
	t.Logf("all %d acknowledged messages delivered; %d duplicate deliveries; %d unacknowledged publishes delivered anyway",
		ackedCount, duplicates, unackedDelivered)

	// A delivered message is done: the restarted server no longer lists it. Check the first
	// and last acknowledged messages (delivered before and after the crash, most likely).
	for _, id := range []string{ackList[0], ackList[len(ackList)/2], ackList[len(ackList)-1]} {
		msgID := acked[id]
		var status int
		var body string
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if status, body = getMessage(t, client, p2, msgID); status == http.StatusNotFound {
				break
			}
		}
		require.Equal(t, http.StatusNotFound, status,
			"GET /v2/messages/%s for delivered message %s on the restarted server: body %s", msgID, id, body)
	}
}

// TestCrashRecoveryGracefulRestartKeepsPending proves that a SIGTERM shutdown loses nothing that
// is still waiting: delayed messages published before the shutdown are delivered by the
// restarted process on the same data directory, not before their delay, and the restarted
// process keeps the token and signing keys (receivers would reject its deliveries otherwise).
func TestCrashRecoveryGracefulRestartKeepsPending(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, stops and restarts the duraton binary")
	}
	const n = 20
	var (
		recvMu   sync.Mutex
		received = map[string]time.Time{}
	)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		recvMu.Lock()
		if _, seen := received[string(b)]; !seen {
			received[string(b)] = time.Now()
		}
		recvMu.Unlock()
	}))
	t.Cleanup(endpoint.Close)

	dataDir := t.TempDir()
	p1 := startDuraton(t, dataDir)
	client := newAPIClient(t, 10*time.Second)
	published := time.Now()
	for i := range n {
		req, err := p1.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+endpoint.URL+"/later",
			strings.NewReader(fmt.Sprintf("later-%02d", i)))
		require.NoError(t, err)
		req.Header.Set("Upstash-Delay", "3s")
		res, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, res.StatusCode, "publish %d", i)
	}
	p1.Stop()
	recvMu.Lock()
	early := len(received)
	recvMu.Unlock()
	require.Zero(t, early, "messages with a 3s delay were delivered before the shutdown")

	p2 := startDuraton(t, dataDir)
	require.Equal(t, p1.Token, p2.Token, "the token changed across a restart")
	require.Equal(t, p1.CurrentSigningKey, p2.CurrentSigningKey, "the current signing key changed across a restart")
	require.Equal(t, p1.NextSigningKey, p2.NextSigningKey, "the next signing key changed across a restart")

	require.Eventually(t, func() bool {
		recvMu.Lock()
		defer recvMu.Unlock()
		return len(received) == n
	}, 30*time.Second, 50*time.Millisecond, "every delayed message is delivered after the restart")
	recvMu.Lock()
	defer recvMu.Unlock()
	for body, at := range received {
		require.GreaterOrEqual(t, at.Sub(published), 2900*time.Millisecond, "%s delivered before its 3s delay", body)
	}
}

// publishText publishes body as text/plain to dest with Upstash-Retries: 3 and returns the
// messageId; any non-200/201 answer is an error.
func publishText(client *http.Client, p *proc, dest, body string) (string, error) {
	req, err := p.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+dest, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Upstash-Retries", "3")
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("HTTP %d: %s", res.StatusCode, strings.TrimSpace(string(raw)))
	}
	var answer struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || answer.MessageID == "" {
		return "", fmt.Errorf("HTTP %d with a body that is not {\"messageId\": …}: %s", res.StatusCode, raw)
	}
	return answer.MessageID, nil
}

// getMessage answers GET /v2/messages/{id}: status and body (status 0 on a transport error).
func getMessage(t *testing.T, client *http.Client, p *proc, msgID string) (int, string) {
	t.Helper()
	req, err := p.apiRequest(context.Background(), http.MethodGet, "/v2/messages/"+msgID, nil)
	require.NoError(t, err)
	res, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, string(raw)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
