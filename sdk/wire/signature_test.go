package wire_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

const (
	testCurrentKey = "sig_current_0123456789abcdef0123456789"
	testNextKey    = "sig_next_0123456789abcdef0123456789abcd"
	testURL        = "https://example.com/api/workflow"
)

// testNow is the fixed clock of these tests.
func testNow() time.Time { return time.Unix(1_700_000_000, 0) }

func TestBodyHash(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		body []byte
		want string
	}{
		{name: "Empty", body: nil, want: "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"},
		{name: "EmptyNonNil", body: []byte{}, want: "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"},
		{name: "JSON", body: []byte(`{"hello":"world"}`), want: "k6I5cakU5erL8KjSUVTNownDwccvu5kU1Hxg88toFYg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, wire.BodyHash(tt.body))
		})
	}
}

func TestNewClaims(t *testing.T) {
	t.Parallel()

	c := wire.NewClaims(testURL, []byte("x"), testNow(), "jwt_1")
	require.Equal(t, wire.Claims{
		Issuer:    "Upstash",
		Subject:   testURL,
		ID:        "jwt_1",
		Body:      wire.BodyHash([]byte("x")),
		IssuedAt:  1_700_000_000,
		NotBefore: 1_699_999_999, // wire.NotBeforeSkew
		ExpiresAt: 1_700_000_300,
	}, c)
}

// A signer whose clock runs a few milliseconds ahead of the endpoint's (a replica signs
// on the database's clock) must not make a token the endpoint finds not yet valid when
// it checks with no tolerance, as the official SDKs do. Before nbf was backdated, a
// token signed 2 ms into a second failed at an endpoint 7 ms behind.
func TestTokenValidAtAnEndpointSlightlyBehind(t *testing.T) {
	t.Parallel()
	signer := time.Unix(1_700_000_000, 2_000_000)
	endpoint := time.Unix(1_699_999_999, 995_000_000)
	c := wire.NewClaims(testURL, []byte("x"), signer, "jwt_1")
	// jose's jwtVerify, which the official SDKs use, checks nbf and exp against the
	// endpoint's clock in whole seconds with no tolerance by default (iat only with a
	// maxTokenAge, which they do not set).
	now := endpoint.Unix()
	require.LessOrEqual(t, c.NotBefore, now, "nbf")
	require.Greater(t, c.ExpiresAt, now, "exp")
}

// TestSignGolden pins the exact token bytes. The expected value was computed
// independently (Python hmac/hashlib), so it checks the header, the claim order, the
// unescaped JSON and the key handling (UTF-8 bytes, not base64-decoded).
func TestSignGolden(t *testing.T) {
	t.Parallel()

	c := wire.NewClaims("https://example.com/api?a=1&b=2", []byte(`{"hello":"world"}`), testNow(), "jwt_golden")
	c.NotBefore = c.IssuedAt // the claims the golden token was computed for
	got, err := wire.Sign("sig_test_key", c)
	require.NoError(t, err)
	require.Equal(t, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."+
		"eyJpc3MiOiJVcHN0YXNoIiwic3ViIjoiaHR0cHM6Ly9leGFtcGxlLmNvbS9hcGk_YT0xJmI9MiIsImp0aSI6Imp3dF9nb2xkZW4iLCJib2R5IjoiazZJNWNha1U1ZXJMOEtqU1VWVE5vd25Ed2NjdnU1a1UxSHhnODh0b0ZZZyIsImlhdCI6MTcwMDAwMDAwMCwibmJmIjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDAzMDB9."+
		"ksNQIPPcMT8gburwploPiyjFm43m0TdUy3QLNeiA1u0", got)

	v := wire.Verifier{CurrentKey: "sig_test_key"}
	require.NoError(t, v.Verify(got, []byte(`{"hello":"world"}`), "https://example.com/api?a=1&b=2", testNow()))
}

func TestSignEmptyKey(t *testing.T) {
	t.Parallel()

	_, err := wire.Sign("", wire.NewClaims(testURL, nil, testNow(), "jwt_1"))
	require.ErrorIs(t, err, wire.ErrNoSigningKey)
}

func TestVerify(t *testing.T) {
	t.Parallel()

	body := []byte(`{"step":1}`)
	verifier := wire.Verifier{CurrentKey: testCurrentKey, NextKey: testNextKey}
	claimsAt := func(at time.Time) wire.Claims { return wire.NewClaims(testURL, body, at, "jwt_1") }
	valid := claimsAt(testNow())

	tests := []struct {
		name     string
		token    string
		body     []byte // defaults to body
		url      string // defaults to testURL; "-" means no subject check
		verifier *wire.Verifier
		now      time.Time // defaults to testNow()
		wantErr  error
	}{
		{name: "Valid", token: sign(t, testCurrentKey, valid)},
		{name: "ValidWithoutURL", token: sign(t, testCurrentKey, valid), url: "-"},
		{name: "ValidEmptyBody", token: sign(t, testCurrentKey, wire.NewClaims(testURL, nil, testNow(), "j")), body: []byte{}},
		{name: "NextKeyAccepted", token: sign(t, testNextKey, valid)},
		{name: "OnlyNextKeyConfigured", token: sign(t, testNextKey, valid), verifier: &wire.Verifier{NextKey: testNextKey}},
		{name: "RetiredKeyRejected", token: sign(t, "sig_retired", valid), wantErr: wire.ErrSignatureInvalid},
		{name: "WrongKey", token: sign(t, testCurrentKey, valid), verifier: &wire.Verifier{CurrentKey: "other"}, wantErr: wire.ErrSignatureInvalid},
		{name: "Base64DecodedKeyRejected", token: sign(t, "c2lnX2tleQ", valid), verifier: &wire.Verifier{CurrentKey: "sig_key"}, wantErr: wire.ErrSignatureInvalid},
		{name: "NoKeys", token: sign(t, testCurrentKey, valid), verifier: &wire.Verifier{}, wantErr: wire.ErrNoSigningKey},
		{name: "Missing", token: "", wantErr: wire.ErrSignatureMissing},
		{name: "Malformed", token: "not.a-jwt", wantErr: wire.ErrSignatureInvalid},
		{name: "Oversized", token: strings.Repeat("a", wire.MaxTokenSize+1), wantErr: wire.ErrSignatureTooLarge},
		{name: "OversizedDots", token: strings.Repeat(".", wire.MaxTokenSize+1), wantErr: wire.ErrSignatureTooLarge},

		// Time: exp is testNow()+300s; the default leeway is 30s in both directions.
		{name: "ExpiredBeyondLeeway", token: sign(t, testCurrentKey, valid), now: testNow().Add(331 * time.Second), wantErr: wire.ErrSignatureExpired},
		{name: "ExpiredWithinLeeway", token: sign(t, testCurrentKey, valid), now: testNow().Add(329 * time.Second)},
		{name: "FutureBeyondLeeway", token: sign(t, testCurrentKey, claimsAt(testNow().Add(31*time.Second))), wantErr: wire.ErrSignatureNotYetValid},
		{name: "FutureWithinLeeway", token: sign(t, testCurrentKey, claimsAt(testNow().Add(29*time.Second)))},
		{name: "FutureIssuedAtOnly", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.IssuedAt += 60 })), wantErr: wire.ErrSignatureNotYetValid},
		{name: "CustomLeewayExpired", token: sign(t, testCurrentKey, valid), now: testNow().Add(306 * time.Second), verifier: &wire.Verifier{CurrentKey: testCurrentKey, Leeway: 5 * time.Second}, wantErr: wire.ErrSignatureExpired},
		{name: "CustomLeewayAccepted", token: sign(t, testCurrentKey, valid), now: testNow().Add(304 * time.Second), verifier: &wire.Verifier{CurrentKey: testCurrentKey, Leeway: 5 * time.Second}},
		{name: "NegativeLeewayIsStrict", token: sign(t, testCurrentKey, valid), now: testNow().Add(301 * time.Second), verifier: &wire.Verifier{CurrentKey: testCurrentKey, Leeway: -1}, wantErr: wire.ErrSignatureExpired},

		// Claims.
		{name: "WrongIssuer", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.Issuer = "Evil" })), wantErr: wire.ErrSignatureInvalid},
		{name: "MissingIssuer", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.Issuer = "" })), wantErr: wire.ErrSignatureInvalid},
		{name: "MissingExp", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.ExpiresAt = 0 })), wantErr: wire.ErrSignatureInvalid},
		{name: "SubjectMismatch", token: sign(t, testCurrentKey, valid), url: testURL + "/", wantErr: wire.ErrSubjectMismatch},
		{name: "SubjectMissing", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.Subject = "" })), wantErr: wire.ErrSubjectMismatch},
		{name: "TamperedBody", token: sign(t, testCurrentKey, valid), body: []byte(`{"step":2}`), wantErr: wire.ErrBodyMismatch},
		{name: "MissingBodyClaim", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.Body = "" })), wantErr: wire.ErrBodyMismatch},
		{name: "PaddedBodyClaim", token: sign(t, testCurrentKey, withClaims(valid, func(c *wire.Claims) { c.Body += "=" }))},
		{name: "FractionalNumericDates", token: forge(t, `{"alg":"HS256","typ":"JWT"}`, fractional(valid), sha256.New, testCurrentKey)},

		// Algorithms and headers.
		{name: "AlgNone", token: forge(t, `{"alg":"none","typ":"JWT"}`, valid, nil, ""), wantErr: wire.ErrSignatureInvalid},
		{name: "HS384", token: forge(t, `{"alg":"HS384","typ":"JWT"}`, valid, sha512.New384, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "HS512", token: forge(t, `{"alg":"HS512","typ":"JWT"}`, valid, sha512.New, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "RS256HeaderWithHMAC", token: forge(t, `{"alg":"RS256","typ":"JWT"}`, valid, sha256.New, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "ES256Header", token: forge(t, `{"alg":"ES256","typ":"JWT"}`, valid, sha256.New, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "JKUHeader", token: forge(t, `{"alg":"HS256","typ":"JWT","jku":"https://evil.example/keys"}`, valid, sha256.New, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "CritHeader", token: forge(t, `{"alg":"HS256","crit":["exp"],"typ":"JWT"}`, valid, sha256.New, testCurrentKey), wantErr: wire.ErrSignatureInvalid},
		{name: "KidHeaderIgnored", token: forge(t, `{"alg":"HS256","kid":"../../etc/passwd","typ":"JWT"}`, valid, sha256.New, testCurrentKey)},
		{name: "TamperedPayload", token: swapPayload(t, sign(t, testCurrentKey, valid), withClaims(valid, func(c *wire.Claims) { c.ExpiresAt += 3600 })), wantErr: wire.ErrSignatureInvalid},
		{name: "NonCanonicalSignatureEncoding", token: nonCanonical(t, sign(t, testCurrentKey, valid)), wantErr: wire.ErrSignatureInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			v := verifier
			if tt.verifier != nil {
				v = *tt.verifier
			}
			b := body
			if tt.body != nil {
				b = tt.body
			}
			url := testURL
			switch tt.url {
			case "":
			case "-":
				url = ""
			default:
				url = tt.url
			}
			now := testNow()
			if !tt.now.IsZero() {
				now = tt.now
			}

			err := v.Verify(tt.token, b, url, now)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func sign(t *testing.T, key string, c wire.Claims) string {
	t.Helper()
	tok, err := wire.Sign(key, c)
	require.NoError(t, err)
	return tok
}

func withClaims(c wire.Claims, edit func(*wire.Claims)) wire.Claims {
	edit(&c)
	return c
}

// fractional re-encodes c with iat/nbf/exp as JSON floats, which JWT allows.
func fractional(c wire.Claims) map[string]any {
	return map[string]any{
		"iss": c.Issuer, "sub": c.Subject, "jti": c.ID, "body": c.Body,
		"iat": float64(c.IssuedAt) + 0.25, "nbf": float64(c.NotBefore) + 0.25, "exp": float64(c.ExpiresAt) + 0.25,
	}
}

// forge builds a token with an arbitrary header, MACed with h (nil: empty signature).
func forge(t *testing.T, header string, claims any, h func() hash.Hash, key string) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	signing := b64(header) + "." + b64(string(payload))
	if h == nil {
		return signing + "."
	}
	mac := hmac.New(h, []byte(key))
	mac.Write([]byte(signing))
	return signing + "." + b64(string(mac.Sum(nil)))
}

// swapPayload keeps tok's header and signature but replaces its claims.
func swapPayload(t *testing.T, tok string, c wire.Claims) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	payload, err := json.Marshal(c)
	require.NoError(t, err)
	return parts[0] + "." + b64(string(payload)) + "." + parts[2]
}

// nonCanonical changes the unused low bits of the signature's last base64 character,
// so a lenient decoder would still see the same MAC.
func nonCanonical(t *testing.T, tok string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	require.GreaterOrEqual(t, last, 0)
	// A 32-byte MAC is 43 characters; the last one carries 4 data bits and 2 zero bits.
	return tok[:len(tok)-1] + string(alphabet[last|1])
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
