package wire

// Scanners the hand-written JSON fast paths share (the signature's claims here, a
// delivery's step objects in sdk): each cuts one value off the front of b, or says the
// input is not in the plain shape it takes, and the caller falls back to encoding/json.

// CutPlainString cuts a JSON string of printable ASCII other than " and \ off the front
// of b: its content and what follows it.
func CutPlainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// CutInt cuts a JSON integer (-?(0|[1-9][0-9]*), at most maxDigits digits) off the
// front of b. maxDigits ≤ 15 keeps it exact through a float64 (|n| < 2^53).
func CutInt(b []byte, maxDigits int) (n int64, rest []byte, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	digits := 0
	for digits < len(b) && b[digits] >= '0' && b[digits] <= '9' {
		n = n*10 + int64(b[digits]-'0')
		digits++
	}
	if digits == 0 || digits > maxDigits || (digits > 1 && b[0] == '0') {
		return 0, nil, false
	}
	if neg {
		n = -n
	}
	return n, b[digits:], true
}
