package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedWriter blocks its first Write until released: a backup download that stalls.
type gatedWriter struct {
	writing chan struct{} // closed at the first Write
	release chan struct{}
	once    sync.Once
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{writing: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.writing) })
	<-g.release
	return len(p), nil
}

// A backup whose download stalls does not stall the store: commits that grow the file
// past its mapping (a checkpoint then remaps it) and reads go on while the download
// waits. The snapshot is taken before the first byte is sent; a read transaction held
// for the download blocked the remap, then every read and, the log full, every commit.
func TestStalledBackupDownloadDoesNotStallCommits(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "d.db"), Options{CheckpointBytes: 64 << 10, InitialMmapBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Update(func(tx *Tx) error { return tx.CreateProject(&Project{ID: "p"}) }))
	value := bytes.Repeat([]byte("v"), 32<<10)
	put := func(i int) error {
		return s.Update(func(tx *Tx) error {
			return tx.PutMessage(&Message{ID: fmt.Sprintf("msg_%05d", i), Project: "p", URL: "http://x.test/", Body: value})
		})
	}
	for i := range 16 {
		require.NoError(t, put(i))
	}

	w := newGatedWriter()
	backup := make(chan error, 1)
	go func() {
		_, err := s.Backup(w, func(int64) {})
		backup <- err
	}()
	defer func() {
		close(w.release)
		require.NoError(t, <-backup)
	}()
	<-w.writing

	done := make(chan error, 1)
	go func() {
		for i := 16; i < 16+256; i++ { // 8 MiB: the file outgrows its 1 MiB mapping
			if err := put(i); err != nil {
				done <- err
				return
			}
		}
		done <- s.View(func(tx *Tx) error {
			_, err := tx.Message("p", "msg_00100")
			return err
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("commits and reads stalled behind a stalled backup download")
	}
}
