package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// fastVerify accepts the tokens Sign makes without the JWT library's general parse (a
// header decoded into a map, a fresh HMAC per key): the header must be exactly Sign's,
// the signature must match a key, and then every check the library makes with
// VerifyClaims's options is made the same way, on claims decoded the same way. It
// answers ok only for a token the library would accept with the same claims; anything
// else (including every failure) is left to parseVerify, so errors are unchanged
// (TestFastVerifyAgreesWithTheLibrary).
func (v Verifier) fastVerify(token string, body []byte, url string, now time.Time) (Claims, bool) {
	header, rest, ok := strings.Cut(token, ".")
	if !ok || header != jwtHeader {
		return Claims{}, false
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return Claims{}, false
	}
	strict := base64.RawURLEncoding.Strict() // the library's WithStrictDecoding
	var sigBuf [sha256.Size]byte
	if strict.DecodedLen(len(sig)) != len(sigBuf) {
		return Claims{}, false
	}
	if n, err := strict.Decode(sigBuf[:], []byte(sig)); err != nil || n != len(sigBuf) {
		return Claims{}, false
	}
	signing := []byte(token[:len(header)+1+len(payload)])
	matched := false
	for _, key := range [...]string{v.CurrentKey, v.NextKey} {
		if key == "" {
			continue
		}
		mac := macs.get(key)
		mac.Write(signing)
		var sum [sha256.Size]byte
		matched = hmac.Equal(sigBuf[:], mac.Sum(sum[:0]))
		macs.put(key, mac)
		if matched {
			break
		}
	}
	if !matched {
		return Claims{}, false
	}
	raw, err := strict.DecodeString(payload)
	if err != nil {
		return Claims{}, false
	}
	c, ok := decodeSignedClaims(raw) // claims_fast.go
	if !ok {
		var tc tokenClaims
		// The same struct as the library's decode; Unmarshal is stricter than its Decoder
		// (nothing may follow the object), which only leaves more to the library.
		if err := json.Unmarshal(raw, &tc); err != nil {
			return Claims{}, false
		}
		c = tc.checked()
	}
	leeway := v.leeway()
	switch {
	case !c.hasExp || !now.Before(c.exp.Add(leeway)): // WithExpirationRequired
	case c.hasNbf && now.Before(c.nbf.Add(-leeway)):
	case c.hasIat && now.Before(c.iat.Add(-leeway)): // WithIssuedAt
	case c.Issuer != Issuer: // WithIssuer
	case url != "" && c.Subject != url:
	case !bodyHashIs(strings.TrimRight(c.Body, "="), body):
	default:
		return c.out(), true
	}
	return Claims{}, false
}

// bodyHashIs reports whether claim is BodyHash(body), without making the hash a string.
func bodyHashIs(claim string, body []byte) bool {
	sum := sha256.Sum256(body)
	var enc [43]byte // base64.RawURLEncoding.EncodedLen(sha256.Size)
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	return claim == string(enc[:])
}
