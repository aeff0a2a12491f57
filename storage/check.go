package storage

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/internal/walkv"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// CheckReport is what Check found.
type CheckReport struct {
	Path     string
	Size     int64
	PageSize int
	Pages    int64    // the high-water mark: pages the file holds
	Problems []string // empty when the file is consistent
	// Truncated is set when more than the requested number of problems were found.
	Truncated bool
	// LogDamage is damage in the write-ahead log (also listed in Problems).
	LogDamage *LogDamage
}

// Check runs bbolt's consistency check (every page reachable exactly once, keys in
// order, pages of the right kind) on the data file at path after Validate's checks and
// a walk of the tree that bbolt's own would die on, and
// never writes: the file is opened read-only with a shared lock, so a running server
// (which holds the exclusive lock) makes it fail with ErrLocked. At most maxProblems
// problems are collected. The error is for a check that could not run; what it found is
// in the report.
func Check(path string, maxProblems int) (CheckReport, error) {
	r := CheckReport{Path: path}
	info, err := os.Stat(path)
	if err != nil {
		return r, fmt.Errorf("storage: %w", err)
	}
	r.Size = info.Size()
	if err := boltkv.Validate(path); err != nil {
		r.Problems = []string{err.Error()}
		return r, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return r, fmt.Errorf("storage: open %s: %w", path, ErrLocked)
	}
	if err != nil {
		r.Problems = []string{err.Error()}
		return r, nil
	}
	defer db.Close()
	r.PageSize = db.Info().PageSize
	// The tree walk first: bbolt's check rebuilds the freelist by a walk of its own,
	// which panics beyond recover on a page that is not what its parent says.
	if err := boltkv.CheckFile(path); err != nil {
		r.Problems = []string{err.Error()}
		return r, nil
	}
	err = db.View(func(tx *bolt.Tx) error {
		r.Pages = int64(tx.Size()) / int64(r.PageSize)
		for err := range tx.Check() {
			if len(r.Problems) == maxProblems {
				r.Truncated = true
				continue // drain: Check's goroutine ends only when the channel does
			}
			r.Problems = append(r.Problems, err.Error())
		}
		return nil
	})
	if err != nil || len(r.Problems) > 0 {
		return r, err
	}
	d, err := walkv.CheckLogDB(db)
	if err != nil {
		return r, err
	}
	if d != nil {
		r.LogDamage = d
		r.Problems = append(r.Problems, d.String())
	}
	return r, nil
}
