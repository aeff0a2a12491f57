package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// TestBackupDuringLoadRestores: a backup taken with `duraton backup` while clients
// publish restores (`duraton restore`) to a server that delivers every message that was
// acknowledged before the backup started. The messages are delayed so that the original
// server, killed right after the backup, delivers none of them itself.
func TestBackupDuringLoadRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary")
	}
	t.Parallel()
	bin, err := duratonBinary()
	require.NoError(t, err)

	var mu sync.Mutex
	delivered := map[string]int{}
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get("Upstash-Message-Id")]++
		mu.Unlock()
	}))
	defer ep.Close()

	dirA := t.TempDir()
	a := startDuratonAddr(t, dirA, "127.0.0.1:0", "--admin-token", "adm-0123456789abcdefghijklmnopqrstuv")
	client := newAPIClient(t, 10*time.Second)

	var (
		ackMu         sync.Mutex
		backupStarted bool
		owed, later   []string
		stop          atomic.Bool
		wg            sync.WaitGroup
		failures      atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				req, err := a.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+ep.URL+"/hook", strings.NewReader("x"))
				if err != nil {
					failures.Add(1)
					return
				}
				req.Header.Set("Upstash-Delay", "6s")
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					return
				}
				var out struct{ MessageID string }
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated {
					failures.Add(1)
					return
				}
				ackMu.Lock()
				if backupStarted {
					later = append(later, out.MessageID)
				} else {
					owed = append(owed, out.MessageID)
				}
				ackMu.Unlock()
			}
		})
	}

	time.Sleep(300 * time.Millisecond) // load before the backup: bounded, it only sets the mix
	ackMu.Lock()
	backupStarted = true
	ackMu.Unlock()
	file := filepath.Join(t.TempDir(), "snap.db")
	out, err := exec.Command(bin, "backup", "--to", file, "--url", a.URL, "--admin-token", "adm-0123456789abcdefghijklmnopqrstuv").CombinedOutput()
	require.NoError(t, err, "duraton backup: %s", out)
	require.Contains(t, string(out), "backup written to "+file)
	time.Sleep(100 * time.Millisecond) // and during/after it
	stop.Store(true)
	wg.Wait()
	require.Zero(t, failures.Load(), "publishes failed while the server was up")
	// A second backup checkpoints what came after the first into the data file, so the
	// log left at the kill no longer fits the first backup's state.
	out, err = exec.Command(bin, "backup", "--to", filepath.Join(t.TempDir(), "later.db"), "--url", a.URL, "--admin-token", "adm-0123456789abcdefghijklmnopqrstuv").CombinedOutput()
	require.NoError(t, err, "duraton backup: %s", out)
	a.Kill()

	// Restored over the killed server's own data: its write-ahead log holds what was
	// acknowledged after the backup, and goes with the file it replaces (a server would
	// refuse to replay it over the restored one).
	logs, err := filepath.Glob(filepath.Join(dirA, "duraton.db-wal.*"))
	require.NoError(t, err)
	require.NotEmpty(t, logs, "a killed server leaves its write-ahead log")
	out, err = exec.Command(bin, "restore", "--from", file, "--data", dirA, "--force").CombinedOutput()
	require.NoError(t, err, "duraton restore: %s", out)
	b := startDuratonAddr(t, dirA, "127.0.0.1:0")
	_ = b

	require.NotEmpty(t, owed)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for _, id := range owed {
			if delivered[id] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d messages acknowledged before the backup were not delivered by the restored server", missing, len(owed))
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	extra := 0
	for _, id := range later {
		if delivered[id] > 0 {
			extra++
		}
	}
	mu.Unlock()
	t.Logf("acknowledged before the backup: %d, all delivered after restore; acknowledged after it started: %d, of which in the snapshot and delivered: %d", len(owed), len(later), extra)
}

func TestBackupAndRestoreRefuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		c := run(context.Background(), args, &out, &errOut, envOf(nil))
		return c, out.String() + errOut.String()
	}
	c, out := code("backup", "--admin-token", "x")
	require.Equal(t, 1, c)
	require.Contains(t, out, "--to FILE is required")
	c, out = code("backup", "--to", filepath.Join(dir, "b.db"))
	require.Equal(t, 1, c)
	require.Contains(t, out, "--admin-token")

	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, writeTestFile(junk, "not a database"))
	c, out = code("restore", "--from", junk, "--data", filepath.Join(dir, "data"))
	require.Equal(t, 1, c)
	require.Contains(t, out, "is not a usable backup")

	good := filepath.Join(dir, "good.db")
	src, err := storage.Open(good, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, src.Close())
	live, err := storage.Open(dataFile(filepath.Join(dir, "live")), storage.Options{})
	require.NoError(t, err)
	defer live.Close()
	c, out = code("restore", "--from", good, "--data", filepath.Join(dir, "live"))
	require.Equal(t, 1, c)
	require.Contains(t, out, "exists (use --force to replace it)")
	c, out = code("restore", "--from", good, "--data", filepath.Join(dir, "live"), "--force")
	require.Equal(t, 1, c)
	require.Contains(t, out, "in use by a running server")
	c, out = code("restore", "--from", good, "--data", filepath.Join(dir, "fresh"))
	require.Equal(t, 0, c, out)
	require.NoError(t, storage.Verify(dataFile(filepath.Join(dir, "fresh"))))
}

func writeTestFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}
