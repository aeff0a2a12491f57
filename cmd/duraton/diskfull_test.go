package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDiskFullThenFreedKeepsAcknowledged: on a small tmpfs, a disk filled to the last byte
// makes some publishes fail (503, nothing stored) while the write-ahead log's
// preallocated space takes others; once space is freed publishing goes on; after a
// SIGKILL every acknowledged message is there. Needs root (it mounts the tmpfs).
func TestDiskFullThenFreedKeepsAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	body := strings.Repeat("x", 20<<10)
	client := newAPIClient(t, 10*time.Second)
	p := startDuratonAddr(t, dir, "127.0.0.1:0")
	var acked []string
	publish := func(n int) (failed []string) {
		for i := range n {
			id, err := publishDelayed(client, p, "http://127.0.0.1:9/never", fmt.Sprintf("%s-%d-%d", body, len(acked), i))
			if err != nil {
				failed = append(failed, err.Error())
				continue
			}
			acked = append(acked, id)
		}
		return failed
	}
	require.Empty(t, publish(20))

	filler := filepath.Join(dir, "filler")
	fillDisk(t, filler)
	failed := publish(200)
	require.NotEmpty(t, failed, "a full disk failed no publish")
	for _, f := range failed {
		require.Contains(t, f, "HTTP 503", "a publish on a full disk must fail as unavailable, nothing stored")
	}
	t.Logf("disk full: %d publishes failed, %d acknowledged in all", len(failed), len(acked))

	require.NoError(t, os.Remove(filler))
	// Publishing goes on once there is space (the next commit retries what failed).
	deadline := time.Now().Add(20 * time.Second)
	for before := len(acked); len(acked) < before+20; {
		if f := publish(1); len(f) > 0 {
			require.True(t, time.Now().Before(deadline), "publishing did not resume after space was freed: %v", f)
			time.Sleep(100 * time.Millisecond)
		}
	}
	p.Kill()

	p = startDuratonAddr(t, dir, "127.0.0.1:0")
	for _, id := range acked {
		require.True(t, messageExists(t, client, p, id), "acknowledged message %s lost", id)
	}
	p.Stop()
}

// fillDisk writes path until the filesystem is full.
func fillDisk(t *testing.T, path string) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			break
		}
	}
	// The last bytes, one at a time.
	for {
		if _, err := f.Write(chunk[:1]); err != nil {
			break
		}
	}
}
