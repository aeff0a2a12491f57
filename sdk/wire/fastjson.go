package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// DecodeBatch decodes a /v2/batch body. What SDKs send — an array of objects with the
// keys destination, headers, body and queue, plain string values — takes a fast path
// without reflection (the batch is how every workflow step is published); anything else
// (\u escapes, other spellings of the keys, nulls, unknown keys, malformed input) goes
// to encoding/json, so the result and every error are json.Unmarshal's.
func DecodeBatch(raw []byte) ([]BatchEntry, error) {
	if entries, ok := fastBatch(raw); ok {
		return entries, nil
	}
	var entries []BatchEntry
	err := json.Unmarshal(raw, &entries)
	return entries, err
}

// DecodeHistory decodes a workflow delivery's history (docs/protocol.md, "Steps"), as Duraton
// writes it — objects with the keys messageId, body (base64) and callType — on a fast
// path without reflection, anything else through encoding/json, with its results and
// errors.
func DecodeHistory(raw []byte) ([]HistoryEntry, error) {
	if entries, ok := fastHistory(raw); ok {
		return entries, nil
	}
	var entries []HistoryEntry
	err := json.Unmarshal(raw, &entries)
	return entries, err
}

// fastHistory is DecodeHistory's fast path; false: leave it to encoding/json.
func fastHistory(raw []byte) ([]HistoryEntry, bool) {
	s := batchScanner{b: raw, ok: true}
	s.ws()
	if !s.eat('[') {
		return nil, false
	}
	s.ws()
	if s.peek() == ']' {
		return nil, false
	}
	var entries []HistoryEntry
	for s.ok {
		var e HistoryEntry
		seen := 0
		s.ws()
		if !s.eat('{') {
			return nil, false
		}
		s.ws()
		for s.ok && s.peek() != '}' {
			key := s.key()
			s.ws()
			s.eat(':')
			s.ws()
			var bit int
			switch string(key) {
			case "messageId":
				e.MessageID, bit = s.str(), 1
			case "callType":
				e.CallType, bit = s.strOr(CallTypeStep), 2
			case "body":
				raw := s.rawStr()
				if !s.ok {
					return nil, false
				}
				body, err := base64.StdEncoding.AppendDecode(make([]byte, 0, base64.StdEncoding.DecodedLen(len(raw))), raw)
				if err != nil {
					return nil, false
				}
				e.Body, bit = body, 4
			default:
				return nil, false
			}
			if seen&bit != 0 {
				return nil, false
			}
			seen |= bit
			s.next()
		}
		s.eat('}')
		if seen&4 == 0 {
			return nil, false // no body: encoding/json leaves it nil
		}
		entries = append(entries, e)
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		if !s.eat(']') {
			return nil, false
		}
		s.ws()
		if s.i != len(s.b) {
			return nil, false
		}
		return entries, s.ok
	}
	return nil, false
}

// rawStr reads a string of base64 characters only (no escapes), without copying.
func (s *batchScanner) rawStr() []byte {
	if !s.eat('"') {
		return nil
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			s.i++
		default:
			s.ok = false
			return nil
		}
	}
	s.ok = false
	return nil
}

// batchScanner reads the fast-path subset of JSON; ok turns false at anything else.
type batchScanner struct {
	b  []byte
	i  int
	ok bool
}

// fastBatch is DecodeBatch's fast path; false: leave it to encoding/json.
func fastBatch(raw []byte) ([]BatchEntry, bool) {
	s := batchScanner{b: raw, ok: true}
	s.ws()
	if !s.eat('[') {
		return nil, false
	}
	var entries []BatchEntry
	s.ws()
	if s.peek() == ']' {
		return nil, false // rare; encoding/json says what it means
	}
	for s.ok {
		e, seen := BatchEntry{}, 0
		s.ws()
		if !s.eat('{') {
			return nil, false
		}
		s.ws()
		for s.ok && s.peek() != '}' {
			key := s.key()
			s.ws()
			s.eat(':')
			s.ws()
			var bit int
			switch string(key) {
			case "destination":
				e.Destination, bit = s.str(), 1
			case "body":
				e.Body, bit = s.str(), 2
			case "queue":
				e.Queue, bit = s.str(), 4
			case "headers":
				e.Headers, bit = s.headers(), 8
			default:
				return nil, false
			}
			if seen&bit != 0 {
				return nil, false // a repeated key: encoding/json's merge rules apply
			}
			seen |= bit
			s.next()
		}
		s.eat('}')
		entries = append(entries, e)
		s.ws()
		if s.peek() == ',' {
			s.i++
			continue
		}
		if !s.eat(']') {
			return nil, false
		}
		s.ws()
		if s.i != len(s.b) {
			return nil, false
		}
		return entries, s.ok
	}
	return nil, false
}

// next moves past a member: a comma followed by another member, or the object's end.
func (s *batchScanner) next() {
	s.ws()
	switch s.peek() {
	case ',':
		s.i++
		s.ws()
		if s.peek() != '"' {
			s.ok = false // a trailing comma, or not a key
		}
	case '}':
	default:
		s.ok = false
	}
}

func (s *batchScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *batchScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	s.ok = false
	return 0
}

func (s *batchScanner) eat(c byte) bool {
	if s.peek() != c {
		s.ok = false
		return false
	}
	s.i++
	return true
}

// key reads an object key to match against known names, without copying it. A key
// with an escape or a control character turns ok false: no known name contains a
// character JSON escapes, so it could only be an unknown key, which the callers leave
// to encoding/json as well.
func (s *batchScanner) key() []byte {
	if !s.eat('"') {
		return nil
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1]
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil
		}
	}
	s.ok = false
	return nil
}

// strOr is str that answers common itself, without copying, when the string is exactly
// common (a history entry's callType is nearly always "step").
func (s *batchScanner) strOr(common string) string {
	if end := s.i + len(common) + 2; end <= len(s.b) && s.b[s.i] == '"' && s.b[end-1] == '"' &&
		string(s.b[s.i+1:end-1]) == common {
		s.i = end
		return common
	}
	return s.str()
}

// str reads a string of valid UTF-8 whose escapes are the one-letter ones (\" \\ \/
// \b \f \n \r \t); \u escapes, control characters and invalid UTF-8 are left to
// encoding/json.
func (s *batchScanner) str() string {
	if !s.eat('"') {
		return ""
	}
	start := s.i
	var buf []byte // the unescaped string, once an escape was seen
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if buf != nil {
				v = append(buf, v...)
			}
			if !utf8.Valid(v) {
				s.ok = false
				return ""
			}
			return string(v)
		case c == '\\':
			if s.i+1 >= len(s.b) {
				s.ok = false
				return ""
			}
			r, ok := simpleEscape(s.b[s.i+1])
			if !ok {
				s.ok = false
				return ""
			}
			if buf == nil {
				buf = make([]byte, 0, min(len(s.b)-start, 512))
			}
			buf = append(append(buf, s.b[start:s.i]...), r)
			s.i += 2
			start = s.i
			continue
		case c < 0x20:
			s.ok = false
			return ""
		}
		s.i++
	}
	s.ok = false
	return ""
}

// simpleEscape is the byte a one-letter JSON escape stands for.
func simpleEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// headerStr reads a string as str does, returning the shared copy of a header name or
// value every SDK entry carries (internedHeaderString) instead of a new one. An interned
// string holds no quote, backslash or control character, so a match up to the next
// quote is the whole string.
func (s *batchScanner) headerStr() string {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		rest := s.b[s.i+1:]
		if end := bytes.IndexByte(rest, '"'); end >= 0 {
			if v, ok := internedHeaderString(rest[:end]); ok {
				s.i += end + 2
				return v
			}
		}
	}
	return s.str()
}

// headers reads an object of string values.
func (s *batchScanner) headers() map[string]string {
	if !s.eat('{') {
		return nil
	}
	h := map[string]string{}
	s.ws()
	for s.ok && s.peek() != '}' {
		k := s.headerStr()
		s.ws()
		s.eat(':')
		s.ws()
		h[k] = s.headerStr()
		s.next()
	}
	s.eat('}')
	return h
}
