package boltkv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duraton/duraton/storage/kv"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A healthy file of every shape bbolt writes (branch pages, overflow pages of large
// values, nested and inline buckets, after deletes) passes the walk: a false alarm would
// refuse to start a healthy server. A page overwritten in it does not.
func TestWalkTree(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kv.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	require.NoError(t, err)
	for round := range 4 {
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			top, err := tx.CreateBucketIfNotExists([]byte("top"))
			if err != nil {
				return err
			}
			for i := range 3000 {
				if err := top.Put(fmt.Appendf(nil, "k%06d", i), make([]byte, 100+i%200)); err != nil {
					return err
				}
			}
			for i := range 20 {
				if err := top.Put(fmt.Appendf(nil, "big%02d", i), make([]byte, 20<<10)); err != nil {
					return err
				}
				inline, err := top.CreateBucketIfNotExists(fmt.Appendf(nil, "inline%02d", i))
				if err != nil {
					return err
				}
				if err := inline.Put([]byte("a"), []byte("b")); err != nil {
					return err
				}
			}
			for i := range 1000 {
				if err := top.Delete(fmt.Appendf(nil, "k%06d", (i*7+round)%3000)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	var root uint64
	ps := uint64(db.Info().PageSize)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("top")).Root())
		return nil
	}))
	require.NoError(t, db.Close())
	require.NoError(t, walkTree(path, time.Second))

	// The top bucket's root page (a branch) overwritten with another page's number.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff, 0xff}, int64(root*ps))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = walkTree(path, time.Second)
	require.ErrorIs(t, err, kv.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("page %d at offset %d", root, root*ps))
}
