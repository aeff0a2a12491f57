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
		name, tail, ok := CutPlainString(rest)
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
			if v, rest, ok = CutPlainString(rest); !ok {
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
		if n, rest, ok = CutInt(rest, maxClaimDigits); !ok {
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
