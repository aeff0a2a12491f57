package storage

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Per-project records kept one JSON value per name (queues, apps, schedules, URL
// groups) share these: the bucket may be missing (a project from an older version, or
// one with none yet), which reads as empty.

// deleteRecord removes a record; ErrNotFound when absent.
func deleteRecord(b *bolt.Bucket, name string) error {
	if b == nil || b.Get([]byte(name)) == nil {
		return ErrNotFound
	}
	return b.Delete([]byte(name))
}

// countRecords is the number of records in b.
func countRecords(b *bolt.Bucket) int {
	if b == nil {
		return 0
	}
	return b.Stats().KeyN
}

// listRecords decodes every record of b in key order; what names the kind in errors.
func listRecords[T any](b *bolt.Bucket, what string) ([]T, error) {
	if b == nil {
		return nil, nil
	}
	var out []T
	err := b.ForEach(func(k, v []byte) error {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("%s %s: %w", what, k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
