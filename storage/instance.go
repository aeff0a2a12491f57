package storage

import (
	"bytes"
	"fmt"
)

// The "instance" bucket holds facts about the data file as a whole.
const (
	bucketInstance = "instance"
	keyMode        = "mode"
)

// Mode is the mode of the binary (dev or serve) that owns the data file, "" when none
// was recorded (a new file, or one from before modes were recorded).
func (t *Tx) Mode() string {
	b := t.tx.Bucket([]byte(bucketInstance))
	if b == nil {
		return ""
	}
	return string(b.Get([]byte(keyMode)))
}

// SetMode records the mode that owns the data file.
func (t *Tx) SetMode(mode string) error {
	b, err := t.tx.CreateBucketIfNotExists([]byte(bucketInstance))
	if err != nil {
		return err
	}
	return b.Put([]byte(keyMode), []byte(mode))
}

// TokenEntry is one API token: the hex SHA-256 it is stored as, and its project.
type TokenEntry struct {
	Hash    string
	Project string
}

// Tokens lists every token, ordered by hash.
func (t *Tx) Tokens() ([]TokenEntry, error) {
	var out []TokenEntry
	b, err := t.root(bucketTokens)
	if err != nil {
		return nil, err
	}
	err = b.ForEach(func(k, v []byte) error {
		out = append(out, TokenEntry{Hash: string(k), Project: string(v)})
		return nil
	})
	return out, err
}

// TokensWithPrefix lists the tokens whose hash starts with prefix.
func (t *Tx) TokensWithPrefix(prefix string) []TokenEntry {
	var out []TokenEntry
	b, err := t.root(bucketTokens)
	if err != nil {
		return nil // a failed read: the engine fails the transaction
	}
	c := b.Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		out = append(out, TokenEntry{Hash: string(k), Project: string(v)})
	}
	return out
}

// DeleteToken revokes a token by its hash. ErrNotFound if there is none.
func (t *Tx) DeleteToken(hash string) error {
	b, err := t.root(bucketTokens)
	if err != nil {
		return err
	}
	if b.Get([]byte(hash)) == nil {
		return fmt.Errorf("token %s: %w", hash, ErrNotFound)
	}
	return b.Delete([]byte(hash))
}
