package wire

import "time"

// checkedClaims are a token's claims as fastVerify checks them: the time claims as
// instants with their presence, as jwt.NumericDate pointers would give them.
type checkedClaims struct {
	Issuer, Subject, ID, Body string
	iat, nbf, exp             time.Time
	hasIat, hasNbf, hasExp    bool
}

// checked converts claims decoded by encoding/json.
func (c *tokenClaims) checked() checkedClaims {
	out := checkedClaims{Issuer: c.Issuer, Subject: c.Subject, ID: c.ID, Body: c.Body}
	if c.IssuedAt != nil {
		out.iat, out.hasIat = c.IssuedAt.Time, true
	}
	if c.NotBefore != nil {
		out.nbf, out.hasNbf = c.NotBefore.Time, true
	}
	if c.ExpiresAt != nil {
		out.exp, out.hasExp = c.ExpiresAt.Time, true
	}
	return out
}

// out is the verified claims as Claims (the same as tokenClaims.out).
func (c *checkedClaims) out() Claims {
	out := Claims{Issuer: c.Issuer, Subject: c.Subject, ID: c.ID, Body: c.Body}
	if c.hasIat {
		out.IssuedAt = c.iat.Unix()
	}
	if c.hasNbf {
		out.NotBefore = c.nbf.Unix()
	}
	if c.hasExp {
		out.ExpiresAt = c.exp.Unix()
	}
	return out
}

// signedClaimNames are the claims in the order appendClaims writes them: four strings,
// then three integer times.
var signedClaimNames = [...]string{"iss", "sub", "jti", "body", "iat", "nbf", "exp"}

const (
	firstTimeClaim = 4
	// maxClaimDigits keeps an integer time exact through the float64 the JWT library
	// decodes it into (|n| < 2^53).
	maxClaimDigits = 15
)

// decodeSignedClaims decodes a payload written exactly as appendClaims writes it: the
// known claims in its order, each at most once, no whitespace, strings of printable
// ASCII without escapes, integer times of at most 15 digits. Such a payload decodes the
// same through encoding/json (TestDecodeSignedClaimsIsUnmarshal); anything else answers
// false and is decoded by encoding/json.
func decodeSignedClaims(raw []byte) (checkedClaims, bool) {
	var c checkedClaims
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return c, false
	}
	rest := raw[1 : len(raw)-1]
	next := 0 // the first name that may still follow
	for first := true; len(rest) > 0; first = false {
		if !first {
			if rest[0] != ',' {
				return c, false
			}
			rest = rest[1:]
		}
		name, tail, ok := cutPlainString(rest)
		if !ok || len(tail) == 0 || tail[0] != ':' {
			return c, false
		}
		rest = tail[1:]
		i := next
		for i < len(signedClaimNames) && signedClaimNames[i] != string(name) {
			i++
		}
		if i == len(signedClaimNames) {
			return c, false
		}
		next = i + 1
		if i < firstTimeClaim {
			var v []byte
			if v, rest, ok = cutPlainString(rest); !ok {
				return c, false
			}
			switch i {
			case 0:
				c.Issuer = Issuer // the only issuer accepted: no copy
				if string(v) != Issuer {
					c.Issuer = string(v)
				}
			case 1:
				c.Subject = string(v)
			case 2:
				c.ID = string(v)
			default:
				c.Body = string(v)
			}
			continue
		}
		var n int64
		if n, rest, ok = cutClaimInt(rest); !ok {
			return c, false
		}
		at := time.Unix(n, 0)
		switch i {
		case 4:
			c.iat, c.hasIat = at, true
		case 5:
			c.nbf, c.hasNbf = at, true
		default:
			c.exp, c.hasExp = at, true
		}
	}
	return c, true
}

// cutPlainString cuts a JSON string of printable ASCII other than " and \ off the front
// of b: its content and what follows it.
func cutPlainString(b []byte) (s, rest []byte, ok bool) {
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

// cutClaimInt cuts a JSON integer (-?(0|[1-9][0-9]*), at most maxClaimDigits digits)
// off the front of b.
func cutClaimInt(b []byte) (n int64, rest []byte, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	digits := 0
	for digits < len(b) && b[digits] >= '0' && b[digits] <= '9' {
		n = n*10 + int64(b[digits]-'0')
		digits++
	}
	if digits == 0 || digits > maxClaimDigits || (digits > 1 && b[0] == '0') {
		return 0, nil, false
	}
	if neg {
		n = -n
	}
	return n, b[digits:], true
}
