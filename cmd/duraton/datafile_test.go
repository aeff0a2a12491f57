package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage"
)

// runBinary runs the duraton binary with args to completion and returns its exit code,
// stdout and stderr. A process killed by a signal (a crash) fails the test.
func runBinary(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	bin, err := duratonBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "DURATON_DATA=") // only --data counts
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.True(t, exit.Exited(), "duraton %v died of %v instead of exiting; stderr:\n%s", args, exit.ProcessState, errb.String())
		return exit.ExitCode(), out.String(), errb.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errb.String()
}

// newDataDir makes a data directory whose file spans many pages.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := storage.Open(dataFile(dir), storage.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *storage.Tx) error {
		if err := tx.CreateProject(&storage.Project{ID: "default", CurrentSigningKey: "k1", NextSigningKey: "k2"}); err != nil {
			return err
		}
		for i := range 3000 {
			if err := tx.PutQueue("default", &storage.Queue{Name: "queue-" + string(rune('a'+i%26)) + time.Duration(i).String()}); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.Close())
	return dir
}

func sumFile(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// TestDamagedDataFileRefused: serve on a damaged data file exits with an error that names
// the file and says what to do, never crashes, and leaves the file as it was;
// `duraton check` reports it and exits 1.
func TestDamagedDataFileRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"Empty", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 0)) }},
		{"Truncated", func(t *testing.T, path string) {
			// A third of the pages in use: the file itself grows ahead of them (sparsely).
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
			require.NoError(t, err)
			var used int64
			require.NoError(t, db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }))
			require.NoError(t, db.Close())
			require.NoError(t, os.Truncate(path, used/3))
		}},
		{"ZeroedMetaPages", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, 8192), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		// Damage past the meta pages, which only a walk of the tree finds: bbolt's
		// own walk (its freelist rebuilt at open) panicked in a goroutine on these.
		{"ZeroedFromPage4", func(t *testing.T, path string) {
			info, err := os.Stat(path)
			require.NoError(t, err)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, info.Size()-4*4096), 4*4096)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"RandomBytesAt16K", func(t *testing.T, path string) {
			junk := make([]byte, 8192)
			_, _ = rand.NewChaCha8([32]byte{27}).Read(junk)
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(junk, 16384)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newDataDir(t)
			path := dataFile(dir)
			tc.damage(t, path)
			before := sumFile(t, path)

			code, _, stderr := runBinary(t, "serve", "--addr", "127.0.0.1:0", "--data", dir)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, path)
			require.Contains(t, stderr, "data file is corrupt")
			require.Contains(t, stderr, "duraton check --data "+dir)
			require.Contains(t, stderr, "backup")
			require.NotContains(t, stderr, "goroutine ")
			require.Equal(t, before, sumFile(t, path), "serve modified the damaged file")

			code, _, stderr = runBinary(t, "dev", "--addr", "127.0.0.1:0", "--data", dir)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stderr, "data file is corrupt")
			require.NotContains(t, stderr, "goroutine ")
			require.Equal(t, before, sumFile(t, path), "dev modified the damaged file")

			code, stdout, stderr := runBinary(t, "check", "--data", dir)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, stdout, "damaged: "+path)
			require.NotContains(t, stderr, "goroutine ")
			require.Equal(t, before, sumFile(t, path), "check modified the file")
		})
	}

	t.Run("HealthyFile", func(t *testing.T) {
		t.Parallel()
		dir := newDataDir(t)
		code, stdout, stderr := runBinary(t, "check", "--data", dir)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "ok: "+filepath.Join(dir, "duraton.db"))
	})

	t.Run("MissingFile", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runBinary(t, "check", "--data", t.TempDir())
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "no such file")
	})
}
