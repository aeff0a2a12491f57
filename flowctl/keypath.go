package flowctl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CheckKeyPath checks a dotted field path into an event's data ("accountId", "user.id"):
// 1–MaxKeyPathLen bytes, no empty segment (so no leading, trailing or doubled dot).
// Paths are field paths, not expressions: any other character is part of a field name.
func CheckKeyPath(path string) error {
	if path == "" {
		return errors.New("the key path is empty")
	}
	if len(path) > MaxKeyPathLen {
		return fmt.Errorf("the key path is %d bytes, the limit is %d", len(path), MaxKeyPathLen)
	}
	for i, seg := range strings.Split(path, ".") {
		if seg == "" {
			return fmt.Errorf("malformed key path %q: segment %d is empty (no leading, trailing or doubled dot)", path, i+1)
		}
	}
	return nil
}

// IsKeyExpr reports whether a control's key is a CEL expression over the event rather than
// a dotted path into its data: it starts with "event." or is not a plain dotted path
// (segments of letters, digits, '_' and '-').
func IsKeyExpr(key string) bool {
	if strings.HasPrefix(key, "event.") {
		return true
	}
	for _, seg := range strings.Split(key, ".") {
		for _, r := range seg { // an empty segment is a malformed path (CheckKeyPath says so)
			if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return true
			}
		}
	}
	return false
}

// BoundKeyValue replaces a key value longer than MaxKeyValueLen by "sha256:" and its hex
// SHA-256, as ResolveKey does.
func BoundKeyValue(value string) string {
	if len(value) > MaxKeyValueLen {
		sum := sha256.Sum256([]byte(value))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return value
}

// MaxKeyValueLen bounds a resolved key value: a longer one is replaced by its hash (see
// ResolveKey). Key values become parts of storage keys, which every engine bounds
// (PostgreSQL refuses an index row over about 2.7 KB, bbolt a key over 32 KiB).
const MaxKeyValueLen = 256

// ResolveKey resolves a checked key path in an event's data to the key value it names, as
// a canonical JSON scalar: a string keeps its quotes, so 1 and "1" differ and the string
// "null" is a real value. A missing field or a non-scalar value (object, array, null)
// returns ok false: the event falls into the whole-workflow scope. An empty path is the
// whole-workflow scope too. A value longer than MaxKeyValueLen bytes is replaced by
// "sha256:" and the hex SHA-256 of the canonical scalar: still one scope per distinct
// value, and never the spelling of a JSON scalar, so it meets no short value.
func ResolveKey(data json.RawMessage, path string) (value string, ok bool) {
	value, ok = resolveKey(data, path)
	return BoundKeyValue(value), ok
}

func resolveKey(data json.RawMessage, path string) (value string, ok bool) {
	if path == "" {
		return "", false
	}
	cur := data
	for _, seg := range strings.Split(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil || obj == nil {
			return "", false
		}
		next, found := obj[seg]
		if !found {
			return "", false
		}
		cur = next
	}
	cur = bytes.TrimSpace(cur)
	if len(cur) == 0 {
		return "", false
	}
	switch cur[0] {
	case '"':
		var s string
		if json.Unmarshal(cur, &s) != nil {
			return "", false
		}
		b, _ := json.Marshal(s) // one spelling per string, whatever escapes the event used
		return string(b), true
	case 't', 'f':
		return string(cur), true
	case '{', '[', 'n':
		return "", false
	default:
		var n json.Number
		if json.Unmarshal(cur, &n) != nil {
			return "", false
		}
		return n.String(), true
	}
}
