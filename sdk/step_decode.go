package sdk

import (
	"encoding/json"

	"github.com/duraton/duraton/sdk/wire"
)

// decodeStep decodes a step object of the history into s. Step objects as the SDKs write
// them — the keys concurrent, out, stepId, stepName, stepType and targetStep, integer
// numbers, names of printable ASCII, out a JSON string, no whitespace — are read without
// reflection (fastStep); anything else goes through encoding/json, so the result and the
// errors are encoding/json's (TestDecodeStepIsUnmarshal).
func decodeStep(raw []byte, s *recordedStep) error {
	if fastStep(raw, s) {
		return nil
	}
	*s = recordedStep{}
	return json.Unmarshal(raw, s)
}

// fastStep is decodeStep's hand-written path; false leaves raw to encoding/json (s may
// then hold part of it).
func fastStep(raw []byte, s *recordedStep) bool {
	*s = recordedStep{}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	rest := raw[1 : len(raw)-1]
	for first := true; len(rest) > 0; first = false {
		if !first {
			if rest[0] != ',' {
				return false
			}
			rest = rest[1:]
		}
		key, tail, ok := wire.CutPlainString(rest)
		if !ok || len(tail) == 0 || tail[0] != ':' {
			return false
		}
		rest = tail[1:]
		switch string(key) { // a repeated key: the last one wins, as in encoding/json
		case "stepId":
			s.StepID, rest, ok = cutInt(rest)
		case "concurrent":
			s.Concurrent, rest, ok = cutInt(rest)
		case "targetStep":
			s.TargetStep, rest, ok = cutInt(rest)
		case "stepName":
			var v []byte
			v, rest, ok = wire.CutPlainString(rest)
			s.StepName = string(v)
		case "stepType":
			var v []byte
			v, rest, ok = wire.CutPlainString(rest)
			s.StepType = string(v)
		case "out":
			var v []byte
			v, rest, ok = cutJSONString(rest)
			s.Out = json.RawMessage(v)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// cutInt is wire.CutInt of at most 15 digits, as an int.
func cutInt(b []byte) (int, []byte, bool) {
	n, rest, ok := wire.CutInt(b, 15)
	return int(n), rest, ok
}

// cutJSONString cuts a whole JSON string, quotes included, off the front of b: no
// control characters, only the escapes JSON allows. Its bytes are copied (the raw body
// is the caller's).
func cutJSONString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return append([]byte(nil), b[:i+1]...), b[i+1:], true
		case c < 0x20:
			return nil, nil, false
		case c == '\\':
			if i+1 >= len(b) {
				return nil, nil, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !isHex4(b[i+2:i+6]) {
					return nil, nil, false
				}
				i += 5
			default:
				return nil, nil, false
			}
		}
	}
	return nil, nil, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
