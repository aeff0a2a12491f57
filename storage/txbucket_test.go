package storage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// txBucketStore is a store with two projects, each with a message.
func txBucketStore(t testing.TB) *Store {
	s, err := Open(filepath.Join(t.TempDir(), "tx.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for _, p := range []string{"p1", "p2"} {
		require.NoError(t, s.Update(func(tx *Tx) error {
			if err := tx.CreateProject(&Project{ID: p}); err != nil {
				return err
			}
			return tx.PutMessage(&Message{ID: "msg_" + p, Project: p, URL: "http://127.0.0.1:1/" + p, Method: "POST"})
		}))
	}
	return s
}

// TestTxBucketCacheAcrossProjects: switching projects inside one transaction reads and
// writes each project's own buckets (the cache is per project), in read and write
// transactions, and a sub-bucket created in the transaction is found again.
func TestTxBucketCacheAcrossProjects(t *testing.T) {
	s := txBucketStore(t)
	check := func(tx *Tx) {
		for _, p := range []string{"p1", "p2", "p1", "p2"} {
			m, err := tx.Message(p, "msg_"+p)
			require.NoError(t, err)
			require.Equal(t, "http://127.0.0.1:1/"+p, m.URL)
			_, err = tx.Message(p, "msg_"+map[string]string{"p1": "p2", "p2": "p1"}[p])
			require.ErrorIs(t, err, ErrNotFound, "project %s must not see the other project's message", p)
		}
		_, err := tx.Message("nope", "msg_p1")
		require.ErrorIs(t, err, ErrNotFound)
	}
	require.NoError(t, s.View(func(tx *Tx) error { check(tx); return nil }))
	require.NoError(t, s.Update(func(tx *Tx) error {
		check(tx)
		// A write into p2 between reads of p1 lands in p2.
		if err := tx.PutMessage(&Message{ID: "msg_new", Project: "p2", URL: "http://127.0.0.1:1/new"}); err != nil {
			return err
		}
		_, err := tx.Message("p1", "msg_new")
		require.ErrorIs(t, err, ErrNotFound)
		m, err := tx.Message("p2", "msg_new")
		require.NoError(t, err)
		require.Equal(t, "http://127.0.0.1:1/new", m.URL)
		// The sub-bucket count exceeds the cache: every one is still the project's own.
		for i, b := range []string{bucketLogs, bucketDue, bucketRuns, bucketWaiters, bucketLookback, bucketRunData, bucketSchedules, bucketTopics, bucketEvents, bucketMessages} {
			wb, err := tx.writeBucket("p1", b)
			require.NoError(t, err)
			require.NoError(t, wb.Put([]byte("k"), []byte{byte(i)}))
		}
		return nil
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		for i, b := range []string{bucketLogs, bucketDue, bucketRuns, bucketWaiters, bucketLookback, bucketRunData, bucketSchedules, bucketTopics, bucketEvents, bucketMessages} {
			require.Equal(t, []byte{byte(i)}, tx.bucket("p1", b).Get([]byte("k")), b)
			if other := tx.bucket("p2", b); other != nil {
				require.Nil(t, other.Get([]byte("k")), b)
			}
		}
		return nil
	}))
}

// TestTxBucketAllocationBudget: after the first, opening a project's sub-buckets in a read
// transaction allocates nothing (it opened two nested Buckets per call before).
func TestTxBucketAllocationBudget(t *testing.T) {
	s := txBucketStore(t)
	require.NoError(t, s.View(func(tx *Tx) error {
		_ = tx.bucket("p1", bucketMessages)
		_ = tx.bucket("p1", bucketLogs)
		n := testing.AllocsPerRun(100, func() {
			_ = tx.bucket("p1", bucketMessages)
			_ = tx.bucket("p1", bucketLogs)
		})
		require.Zero(t, n)
		return nil
	}))
}

// BenchmarkTxReads is what loading a delivery does to the buckets: three reads of one
// project in a read transaction.
func BenchmarkTxReads(b *testing.B) {
	s := txBucketStore(b)
	due := DueEntry{DueAt: time.Now().UnixNano(), Project: "p1", MessageID: "msg_p1"}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.View(func(tx *Tx) error {
			_, _ = tx.Message("p1", "msg_p1")
			_ = tx.HasDue(due)
			_, _ = tx.Run("p1", "wfr_x")
			return nil
		})
	}
}
