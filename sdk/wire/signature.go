package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signature parameters (docs/protocol.md, "Verifying a delivery").
const (
	// Issuer is the iss claim of every Upstash-Signature token.
	Issuer = "Upstash"
	// TokenLifetime is exp − iat of a token made by NewClaims.
	TokenLifetime = 300 * time.Second
	// DefaultLeeway is the clock-skew tolerance a zero Verifier.Leeway stands for.
	DefaultLeeway = 30 * time.Second
	// MaxTokenSize bounds the token length Verify is willing to parse, in bytes.
	MaxTokenSize = 8 << 10

	// jwtHeader is base64url({"alg":"HS256","typ":"JWT"}), the only header Sign emits.
	jwtHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
	algHS256  = "HS256"
)

// SignatureError is the class of a signature failure. The values are constants so no
// caller can reassign them; match a returned error with errors.Is against one of the
// Err* values below. The error Verify returns wraps one of them with detail.
type SignatureError string

func (e SignatureError) Error() string { return string(e) }

// Failure classes returned (wrapped) by Sign and Verifier.Verify.
const (
	// ErrSignatureMissing: the request carried no Upstash-Signature.
	ErrSignatureMissing SignatureError = "wire: signature missing"
	// ErrSignatureTooLarge: the token is longer than MaxTokenSize and was not parsed.
	ErrSignatureTooLarge SignatureError = "wire: signature too large"
	// ErrSignatureInvalid: malformed token, disallowed algorithm or header, a signature
	// that matches neither key, or a bad or missing claim (iss, exp).
	ErrSignatureInvalid SignatureError = "wire: signature invalid"
	// ErrSignatureExpired: the token's exp is in the past beyond the leeway.
	ErrSignatureExpired SignatureError = "wire: signature expired"
	// ErrSignatureNotYetValid: the token's nbf or iat is in the future beyond the leeway.
	ErrSignatureNotYetValid SignatureError = "wire: signature not yet valid"
	// ErrBodyMismatch: the body claim is not the hash of the received body.
	ErrBodyMismatch SignatureError = "wire: body does not match signature"
	// ErrSubjectMismatch: the sub claim is not the URL the verifier expects.
	ErrSubjectMismatch SignatureError = "wire: signature subject does not match url"
	// ErrNoSigningKey: signing or verifying was attempted without a key.
	ErrNoSigningKey SignatureError = "wire: no signing key configured"
)

// Claims of an Upstash-Signature JWT (docs/protocol.md, "Verifying a delivery"). Zero-valued
// fields are omitted from the encoded token.
type Claims struct {
	Issuer    string `json:"iss,omitempty"`
	Subject   string `json:"sub,omitempty"`  // destination URL of the delivery
	ID        string `json:"jti,omitempty"`  // unique per attempt
	Body      string `json:"body,omitempty"` // BodyHash of the delivered bytes
	IssuedAt  int64  `json:"iat,omitempty"`  // unix seconds
	NotBefore int64  `json:"nbf,omitempty"`  // unix seconds
	ExpiresAt int64  `json:"exp,omitempty"`  // unix seconds
}

// BodyHash returns base64url, without padding, of SHA-256(body): the body claim.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// NotBeforeSkew (seconds) backdates a token's nbf from its iat. The official SDKs check
// nbf against the endpoint's clock with no tolerance, so a signer whose clock runs a
// little ahead (a replica signs on the database's clock, +7.7 ms in one CI run) made
// tokens "not yet valid" for the first milliseconds of a second, and a fast delivery
// arrived inside them. The SDKs then try the next key and report "signature
// verification failed". One second covers any skew below a second.
const NotBeforeSkew = 1

// NewClaims returns the claims for one delivery attempt of body to url at now. Every
// attempt must be signed afresh (new jti, iat, exp) so a late retry still verifies.
func NewClaims(url string, body []byte, now time.Time, jti string) Claims {
	iat := now.Unix()
	return Claims{
		Issuer:    Issuer,
		Subject:   url,
		ID:        jti,
		Body:      BodyHash(body),
		IssuedAt:  iat,
		NotBefore: iat - NotBeforeSkew,
		ExpiresAt: iat + int64(TokenLifetime/time.Second),
	}
}

// Sign encodes c as an HS256 JWT with header {"alg":"HS256","typ":"JWT"}. The HMAC key
// is the UTF-8 bytes of key, used as-is (not base64-decoded), as QStash does. The
// output is deterministic for a given key and c.
func Sign(key string, c Claims) (string, error) {
	if key == "" {
		return "", ErrNoSigningKey
	}
	// The claims are appended by hand, in the field order and with the escaping
	// encoding/json (without HTML escaping, like JSON.stringify) would use: one
	// allocation for the token instead of a reflective encoder per delivery.
	var payload [512]byte
	p, err := appendClaims(payload[:0], &c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	const sigLen = sha256.Size
	tok := make([]byte, 0, len(jwtHeader)+2+enc.EncodedLen(len(p))+enc.EncodedLen(sigLen))
	tok = append(tok, jwtHeader...)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, p)
	mac := macs.get(key)
	mac.Write(tok)
	var sum [sigLen]byte
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, mac.Sum(sum[:0]))
	macs.put(key, mac)
	return string(tok), nil
}

// macs keeps keyed HMAC-SHA256 states for reuse (hmac.New costs six allocations and
// two hash blocks; Reset returns a state to just after the key). A project has two
// signing keys, so the table stays small; it is emptied if it ever holds many.
var macs = macPool{pools: map[string]*sync.Pool{}}

type macPool struct {
	mu    sync.RWMutex
	pools map[string]*sync.Pool
}

const maxPooledKeys = 256

func (p *macPool) get(key string) hash.Hash {
	p.mu.RLock()
	pool := p.pools[key]
	p.mu.RUnlock()
	if pool != nil {
		if h, ok := pool.Get().(hash.Hash); ok {
			return h
		}
	}
	return hmac.New(sha256.New, []byte(key))
}

func (p *macPool) put(key string, h hash.Hash) {
	h.Reset()
	p.mu.RLock()
	pool := p.pools[key]
	p.mu.RUnlock()
	if pool == nil {
		p.mu.Lock()
		if pool = p.pools[key]; pool == nil {
			if len(p.pools) >= maxPooledKeys {
				clear(p.pools)
			}
			pool = &sync.Pool{}
			p.pools[key] = pool
		}
		p.mu.Unlock()
	}
	pool.Put(h)
}

// appendClaims appends c's JSON as json.Encoder with SetEscapeHTML(false) writes it
// (without the newline).
func appendClaims(buf []byte, c *Claims) ([]byte, error) {
	buf = append(buf, '{')
	first := true
	var err error
	for _, f := range [...]struct{ name, v string }{{"iss", c.Issuer}, {"sub", c.Subject}, {"jti", c.ID}, {"body", c.Body}} {
		if f.v == "" {
			continue
		}
		buf, first = appendFieldName(buf, f.name, first), false
		if buf, err = appendJSONString(buf, f.v); err != nil {
			return nil, err
		}
	}
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"iat", c.IssuedAt}, {"nbf", c.NotBefore}, {"exp", c.ExpiresAt}} {
		if f.v == 0 {
			continue
		}
		buf, first = appendFieldName(buf, f.name, first), false
		buf = strconv.AppendInt(buf, f.v, 10)
	}
	return append(buf, '}'), nil
}

func appendFieldName(buf []byte, name string, first bool) []byte {
	if !first {
		buf = append(buf, ',')
	}
	buf = append(buf, '"')
	buf = append(buf, name...)
	return append(buf, '"', ':')
}

// appendJSONString appends s as a JSON string: printable ASCII as is, " and \ escaped
// with a backslash (as encoding/json does), anything else through encoding/json (so
// control characters, invalid UTF-8 and U+2028/U+2029 are escaped exactly as it does).
// A step object (a Go SDK publish's body) is printable ASCII with quotes.
func appendJSONString[S ~string | ~[]byte](buf []byte, s S) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(string(s)); err != nil {
				return nil, fmt.Errorf("wire: encode claims: %w", err)
			}
			return append(buf, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...), nil
		}
	}
	buf = append(buf, '"')
	done := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			buf = append(append(buf, s[done:i]...), '\\', c)
			done = i + 1
		}
	}
	buf = append(buf, s[done:]...)
	return append(buf, '"'), nil
}

// Verifier checks Upstash-Signature tokens. It is stricter than the QStash JS Receiver
// (docs/protocol.md, "Verifying a delivery"): HS256 only, exp required, iat checked, no
// key-URL headers. The zero value has no keys and rejects everything.
type Verifier struct {
	// CurrentKey is tried first, then NextKey. Empty keys are skipped.
	CurrentKey, NextKey string
	// Leeway is the clock-skew tolerance applied in both directions to exp, nbf and
	// iat. Zero means DefaultLeeway (30s); a negative value means no tolerance.
	Leeway time.Duration
}

// Verify checks that token is a valid signature, at now, of body delivered to url. An
// empty url skips the subject check (the workflow serve handler does not know it). The
// returned error wraps one of the Err* classes above.
func (v Verifier) Verify(token string, body []byte, url string, now time.Time) error {
	_, err := v.VerifyClaims(token, body, url, now)
	return err
}

// VerifyClaims is Verify that also returns the verified token's claims (sub, jti, exp
// and the others), so a caller that needs them does not parse the token again.
func (v Verifier) VerifyClaims(token string, body []byte, url string, now time.Time) (Claims, error) {
	if token == "" {
		return Claims{}, ErrSignatureMissing
	}
	if len(token) > MaxTokenSize {
		return Claims{}, fmt.Errorf("%w: %d bytes, limit %d", ErrSignatureTooLarge, len(token), MaxTokenSize)
	}
	if v.CurrentKey == "" && v.NextKey == "" {
		return Claims{}, ErrNoSigningKey
	}
	if c, ok := v.fastVerify(token, body, url, now); ok { // verify_fast.go
		return c, nil
	}
	return v.parseVerify(token, body, url, now, v.keys())
}

// parseVerify is VerifyClaims through the JWT library: every token the fast path does
// not accept, and every error.
func (v Verifier) parseVerify(token string, body []byte, url string, now time.Time, keys jwt.VerificationKeySet) (Claims, error) {
	var claims tokenClaims
	_, err := jwt.NewParser(
		jwt.WithValidMethods([]string{algHS256}),
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithIssuer(Issuer),
		jwt.WithLeeway(v.leeway()),
		jwt.WithTimeFunc(func() time.Time { return now }),
	).ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		if h := forbiddenHeader(t.Header); h != "" {
			return nil, fmt.Errorf("header %q is not accepted", h)
		}
		// Tried in order: current key, then next key.
		return keys, nil
	})
	if err != nil {
		return Claims{}, classify(err)
	}
	if url != "" && claims.Subject != url {
		return Claims{}, fmt.Errorf("%w: sub %q, want %q", ErrSubjectMismatch, claims.Subject, url)
	}
	if strings.TrimRight(claims.Body, "=") != BodyHash(body) {
		return Claims{}, fmt.Errorf("%w: %d-byte body", ErrBodyMismatch, len(body))
	}
	return claims.out(), nil
}

// out is the verified claims as Claims.
func (c *tokenClaims) out() Claims {
	out := Claims{Issuer: c.Issuer, Subject: c.Subject, ID: c.ID, Body: c.Body}
	for _, d := range [...]struct {
		src *jwt.NumericDate
		dst *int64
	}{{c.IssuedAt, &out.IssuedAt}, {c.NotBefore, &out.NotBefore}, {c.ExpiresAt, &out.ExpiresAt}} {
		if d.src != nil {
			*d.dst = d.src.Unix()
		}
	}
	return out
}

func (v Verifier) keys() jwt.VerificationKeySet {
	var set jwt.VerificationKeySet
	for _, k := range []string{v.CurrentKey, v.NextKey} {
		if k != "" {
			set.Keys = append(set.Keys, []byte(k))
		}
	}
	return set
}

func (v Verifier) leeway() time.Duration {
	switch {
	case v.Leeway == 0:
		return DefaultLeeway
	case v.Leeway < 0:
		return 0
	}
	return v.Leeway
}

// tokenClaims is the decoding side of Claims: jwt.RegisteredClaims accepts every
// NumericDate form (integer or fractional seconds) and implements jwt.Claims.
type tokenClaims struct {
	jwt.RegisteredClaims
	Body string `json:"body"`
}

// forbiddenHeader returns the first header parameter that points at key material or
// demands extensions. The key is never taken from the token, so these can only be an
// attack or a misconfigured signer; rejecting them keeps the accepted surface minimal.
func forbiddenHeader(h map[string]any) string {
	for _, name := range [...]string{"jku", "jwk", "x5u", "x5c", "crit"} {
		if _, ok := h[name]; ok {
			return name
		}
	}
	return ""
}

// classify maps a golang-jwt error onto one of our classes, keeping its text as detail.
// Time errors win over other claim errors so clock skew is easy to diagnose.
func classify(err error) error {
	class := ErrSignatureInvalid
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		class = ErrSignatureExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		class = ErrSignatureNotYetValid
	}
	return fmt.Errorf("%w: %v", class, err)
}
