package storage

import (
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/storage/kv"
)

// Per-project records kept one JSON value per name (queues, apps, schedules, URL
// groups) share these: the bucket may be missing (a project from an older version, or
// one with none yet), which reads as empty.

// putRecord writes a record of a project's bucket (creating the bucket for a project
// that predates it).
func (t *Tx) putRecord(project, bucket, name string, v any) error {
	b, err := t.writeBucket(project, bucket)
	if err != nil {
		return err
	}
	return put(b, name, v)
}

// getRecord reads a record; ErrNotFound when absent.
func getRecord[T any](b kv.Bucket, name string) (*T, error) {
	var r T
	if err := get(b, name, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// deleteRecord removes a record; ErrNotFound when absent.
func deleteRecord(b kv.Bucket, name string) error {
	if b == nil || b.Get([]byte(name)) == nil {
		return ErrNotFound
	}
	return b.Delete([]byte(name))
}

// countRecords is the number of records in b.
func countRecords(b kv.Bucket) int {
	if b == nil {
		return 0
	}
	return b.KeyCount()
}

// listRecords decodes every record of b in key order; what names the kind in errors.
func listRecords[T any](b kv.Bucket, what string) ([]T, error) {
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
