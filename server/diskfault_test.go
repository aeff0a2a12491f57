package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// faultyStore refuses every write while failing is set, as a full disk does: the error
// is the store's own class for a failed commit.
type faultyStore struct {
	delivery.Store
	failing atomic.Bool
	refused atomic.Int64
}

func (f *faultyStore) Update(fn func(*storage.Tx) error) error {
	if f.failing.Load() {
		f.refused.Add(1)
		return fmt.Errorf("storage: commit: %w: write duraton.db: no space left on device (injected)", storage.ErrWriteFailed)
	}
	return f.Store.Update(fn)
}

// checkFileAtEnd runs `duraton check`'s consistency check on *path once the store is
// closed. Register it before newAPI: cleanups run last-registered first.
func checkFileAtEnd(t *testing.T, path *string) {
	t.Cleanup(func() {
		r, err := storage.Check(*path, 10)
		require.NoError(t, err)
		require.Empty(t, r.Problems, "the data file is consistent after the faults")
	})
}

// TestDiskFaultsInjected: while the store refuses writes, publishes answer 503 and store
// nothing; deliveries whose outcome could not be recorded keep their slot and are
// recorded once writes succeed again, without a restart; nothing acknowledged is lost.
func TestDiskFaultsInjected(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "duraton.db")
	checkFileAtEnd(t, &path)
	var faulty *faultyStore
	env := newAPI(t, envOptions{dataFile: path, store: func(s delivery.Store) delivery.Store {
		faulty = &faultyStore{Store: s}
		return faulty
	}})

	// An endpoint that holds every request until the gate opens.
	gate := make(chan struct{})
	var mu sync.Mutex
	got := map[string]int{}
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("Upstash-Message-Id")]++
		mu.Unlock()
		<-gate
	}))
	t.Cleanup(ep.Close)
	var open sync.Once
	openGate := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(openGate) // before ep.Close: a failed test must not leave handlers held
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	var acked []string
	for i := range 10 {
		acked = append(acked, env.publish(t, ep.URL+"/held", fmt.Appendf(nil, "m%d", i)))
	}
	eventually(t, "10 deliveries held at the endpoint", func() bool { return received() == 10 })

	faulty.failing.Store(true)
	for i := range 5 {
		r := env.call(t, http.MethodPost, "/v2/publish/"+ep.URL+"/refused", fmt.Appendf(nil, "r%d", i))
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), "nothing was stored")
		require.Equal(t, "5", r.Header.Get("Retry-After"))
	}
	before := faulty.refused.Load()
	openGate() // the held deliveries are answered now; their outcomes cannot be stored
	eventually(t, "the engine tried to record the 10 outcomes", func() bool { return faulty.refused.Load() >= before+10 })
	for _, id := range acked {
		require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status, "still pending while the disk is full")
	}

	faulty.failing.Store(false)
	eventually(t, "every acknowledged message recorded as delivered", func() bool {
		for _, id := range acked {
			if env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status != http.StatusNotFound {
				return false
			}
		}
		return true
	})
	logs := env.logs(t, "state=DELIVERED")
	delivered := map[string]bool{}
	for _, ev := range logs.Events {
		delivered[ev.MessageID] = true
	}
	for _, id := range acked {
		require.True(t, delivered[id], "message %s has a DELIVERED log", id)
	}
	id := env.publish(t, ep.URL+"/after", []byte("after"))
	eventually(t, "a publish after the recovery is delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[id] > 0
	})
	require.Equal(t, 11, received(), "the refused publishes were never delivered")
}

// TestDiskFullReal fills a real (tmpfs) filesystem under the data file: publishes answer
// 503 once bbolt cannot write, every acknowledged message is still there, writes succeed
// again as soon as space is freed, and the file passes the consistency check. It needs
// to mount tmpfs (root); it is skipped where that is not permitted.
func TestDiskFullReal(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount tmpfs here (%v): the injected-fault test covers the engine", err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(mnt, 0)) })
	path := filepath.Join(mnt, "duraton.db")
	checkFileAtEnd(t, &path)
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, 1<<20), 0o600))

	// The write-ahead log moves what it holds into the data file every CheckpointBytes,
	// and needs up to about five times that of headroom: at the default (1 MiB) this
	// 4 MiB disk could hold everything in the log, with no room to checkpoint it.
	env := newAPI(t, envOptions{dataFile: path, checkpointBytes: 64 << 10})
	body := bytes.Repeat([]byte("x"), 256<<10)
	var acked []string
	full := false
	for i := 0; i < 64 && !full; i++ {
		r := env.call(t, http.MethodPost, "/v2/publish/"+env.Endpoint.URL("/full"), body, "Upstash-Delay", "1h")
		switch r.Status {
		case http.StatusCreated:
			acked = append(acked, decodeJSON[wire.PublishResult](t, r).MessageID)
		case http.StatusServiceUnavailable:
			require.Contains(t, r.errorMessage(t), "nothing was stored")
			full = true
		default:
			t.Fatalf("publish %d: %d %s", i, r.Status, r.Body)
		}
	}
	require.True(t, full, "4 MiB of tmpfs never filled up")
	require.NotEmpty(t, acked)
	for _, id := range acked {
		require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status, "acknowledged message %s", id)
	}

	require.NoError(t, os.Remove(filler))
	r := env.call(t, http.MethodPost, "/v2/publish/"+env.Endpoint.URL("/full"), []byte("small"), "Upstash-Delay", "1h")
	require.Equal(t, http.StatusCreated, r.Status, "writes succeed again once there is space: %s", r.Body)
	for _, id := range acked {
		require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status)
	}
}
