package storage

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openTestStore opens a store on a real bbolt file with one project "p", and checks the
// file's consistency when the test ends.
func openTestStore(t *testing.T) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "duraton.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error {
		return tx.CreateProject(&Project{ID: "p", CurrentSigningKey: "k1", NextSigningKey: "k2"})
	}))
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}))
	})
	return s
}

func message(ids *IDGen, due time.Time) *Message {
	return &Message{ID: ids.New(PrefixMessage, due), Project: "p", URL: "https://example.com/x", Method: "POST", Body: []byte("hi"), DueAt: due.UnixNano(), State: StateCreated}
}

func TestStore(t *testing.T) {
	t.Parallel()

	t.Run("DueIndexOrdersByTimeThenID", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t)
		var ids IDGen
		base := time.Unix(1_700_000_000, 0)
		late, early, mid := message(&ids, base.Add(3*time.Second)), message(&ids, base.Add(time.Second)), message(&ids, base.Add(2*time.Second))
		require.NoError(t, s.Update(func(tx *Tx) error {
			for _, m := range []*Message{late, early, mid} {
				if err := tx.PutDue(DueOf(m)); err != nil {
					return err
				}
			}
			return nil
		}))
		var got []string
		require.NoError(t, s.View(func(tx *Tx) error {
			return tx.ScanDue(nil, func(e DueEntry) bool { got = append(got, e.MessageID); return true })
		}))
		require.Equal(t, []string{early.ID, mid.ID, late.ID}, got)

		got = nil
		require.NoError(t, s.View(func(tx *Tx) error {
			return tx.ScanDue(DueOf(early).Key(), func(e DueEntry) bool { got = append(got, e.MessageID); return true })
		}))
		require.Equal(t, []string{mid.ID, late.ID}, got, "scan resumes strictly after the given key")
	})

	t.Run("FailingUpdateRollsBackOnlyItself", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t)
		var ids IDGen
		boom := errors.New("boom")
		var wg sync.WaitGroup
		errs := make([]error, 20)
		msgs := make([]*Message, 20)
		for i := range msgs {
			msgs[i] = message(&ids, time.Now())
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Update(func(tx *Tx) error {
					if err := tx.PutMessage(msgs[i]); err != nil {
						return err
					}
					if i%5 == 0 {
						return boom
					}
					return nil
				})
			}()
		}
		wg.Wait()
		require.NoError(t, s.View(func(tx *Tx) error {
			for i, m := range msgs {
				_, err := tx.Message("p", m.ID)
				if i%5 == 0 {
					require.ErrorIs(t, errs[i], boom)
					require.ErrorIs(t, err, ErrNotFound, "a failed update leaves nothing behind")
				} else {
					require.NoError(t, errs[i])
					require.NoError(t, err)
				}
			}
			return nil
		}))
	})

	t.Run("ProjectsAreIsolated", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t)
		var ids IDGen
		m := message(&ids, time.Now())
		require.NoError(t, s.Update(func(tx *Tx) error {
			if err := tx.CreateProject(&Project{ID: "q"}); err != nil {
				return err
			}
			if err := tx.PutMessage(m); err != nil {
				return err
			}
			return tx.PutQueue("p", &Queue{Name: "jobs", Parallelism: 2})
		}))
		require.NoError(t, s.View(func(tx *Tx) error {
			_, err := tx.Message("q", m.ID)
			require.ErrorIs(t, err, ErrNotFound)
			_, err = tx.Queue("q", "jobs")
			require.ErrorIs(t, err, ErrNotFound)
			_, err = tx.Message("nope", m.ID)
			require.ErrorIs(t, err, ErrNotFound)
			return nil
		}))
		err := s.Update(func(tx *Tx) error { return tx.PutMessage(&Message{ID: "x", Project: "nope"}) })
		require.ErrorIs(t, err, ErrNotFound, "writes to a missing project fail")
	})

	t.Run("LogsListNewestFirstWithCursor", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t)
		var ids IDGen
		base := time.Unix(1_700_000_000, 0)
		var all []string
		require.NoError(t, s.Update(func(tx *Tx) error {
			for i := 0; i < 7; i++ {
				ev := &LogEvent{ID: ids.New(PrefixLog, base.Add(time.Duration(i)*time.Second)), State: StateCreated, MessageID: "m"}
				all = append([]string{ev.ID}, all...)
				if err := tx.AppendLog("p", ev); err != nil {
					return err
				}
			}
			return nil
		}))
		var got []string
		cursor := ""
		for pages := 0; pages < 10; pages++ {
			var page []LogEvent
			require.NoError(t, s.View(func(tx *Tx) error {
				var err error
				page, cursor, err = tx.ListLogs("p", cursor, 3, 0, func(*LogEvent) bool { return true })
				return err
			}))
			for _, ev := range page {
				got = append(got, ev.ID)
			}
			if cursor == "" {
				break
			}
		}
		require.Equal(t, all, got)

		cut := IDAt(PrefixLog, base.Add(3*time.Second))
		require.NoError(t, s.Update(func(tx *Tx) error {
			n, err := tx.DeleteLogsBefore("p", cut, 100)
			require.Equal(t, 3, n)
			return err
		}))
	})

	t.Run("DedupExpiry", func(t *testing.T) {
		t.Parallel()
		s := openTestStore(t)
		require.NoError(t, s.Update(func(tx *Tx) error {
			if err := tx.PutDedup("p", "old", &DedupRecord{MessageID: "a", ExpiresAt: 100}); err != nil {
				return err
			}
			return tx.PutDedup("p", "new", &DedupRecord{MessageID: "b", ExpiresAt: 300})
		}))
		require.NoError(t, s.Update(func(tx *Tx) error {
			n, err := tx.DeleteExpiredDedup("p", 200, 10)
			require.Equal(t, 1, n)
			return err
		}))
		require.NoError(t, s.View(func(tx *Tx) error {
			_, err := tx.Dedup("p", "old")
			require.ErrorIs(t, err, ErrNotFound)
			r, err := tx.Dedup("p", "new")
			require.NoError(t, err)
			require.Equal(t, "b", r.MessageID)
			return nil
		}))
	})

	t.Run("DataSurvivesReopen", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "duraton.db")
		s, err := Open(path, Options{})
		require.NoError(t, err)
		var ids IDGen
		m := message(&ids, time.Now())
		require.NoError(t, s.Update(func(tx *Tx) error {
			if err := tx.CreateProject(&Project{ID: "p"}); err != nil {
				return err
			}
			if err := tx.PutMessage(m); err != nil {
				return err
			}
			return tx.PutDue(DueOf(m))
		}))
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Update(func(*Tx) error { return nil }), ErrClosed)

		s, err = Open(path, Options{})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.View(func(tx *Tx) error {
			got, err := tx.Message("p", m.ID)
			require.NoError(t, err)
			require.Equal(t, m.Body, got.Body)
			require.True(t, tx.HasDue(DueOf(m)))
			return nil
		}))
	})

	t.Run("LockedFileIsAClearError", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "duraton.db")
		s, err := Open(path, Options{})
		require.NoError(t, err)
		defer s.Close()
		_, err = Open(path, Options{LockTimeout: 50 * time.Millisecond})
		require.ErrorIs(t, err, ErrLocked)
	})

	t.Run("CorruptFileIsAClearError", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "duraton.db")
		require.NoError(t, os.WriteFile(path, []byte("this is not a bbolt file, just some text that is long enough"), 0o600))
		_, err := Open(path, Options{})
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

func TestIDGenIsStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	var g IDGen
	now := time.Unix(1_700_000_000, 0)
	prev := g.New("x_", now)
	for i := 0; i < 1000; i++ {
		id := g.New("x_", now) // same instant: still strictly increasing
		require.Greater(t, id, prev)
		prev = id
	}
	require.Less(t, IDAt("x_", now), g.New("x_", now.Add(time.Nanosecond)))
}
