package wire_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/sdk/wire"
)

// signByEncoder is the reference Sign: claims through encoding/json without HTML
// escaping, HMAC-SHA256 over header.payload.
func signByEncoder(t require.TestingT, key string, c wire.Claims) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(c))
	b64 := base64.RawURLEncoding
	signing := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + b64.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(signing))
	return signing + "." + b64.EncodeToString(mac.Sum(nil))
}

// TestSignMatchesEncodingJSON: the hand-built claims are byte for byte what
// encoding/json writes, for any strings (quotes, backslashes, control characters,
// HTML characters, non-ASCII, invalid UTF-8, U+2028) and any numbers, zero included.
func TestSignMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"https://e.com/a?x=<1>&y=\"2\"", "http://h/\\path", "http://h/\x00\x1f\x7f", "http://h/é/\u2028/\u2029", "http://h/\xff\xfe", ""} {
		c := wire.Claims{Issuer: wire.Issuer, Subject: sub, ID: "jwt_1", Body: "abc", IssuedAt: 1, ExpiresAt: -5}
		got, err := wire.Sign("k", c)
		require.NoError(t, err)
		require.Equal(t, signByEncoder(t, "k", c), got, "subject %q", sub)
	}
	rapid.Check(t, func(rt *rapid.T) {
		c := wire.Claims{
			Issuer: rapid.String().Draw(rt, "iss"), Subject: rapid.String().Draw(rt, "sub"),
			ID: rapid.StringMatching(`[a-z_0-9"\\<>&]{0,12}`).Draw(rt, "jti"), Body: rapid.String().Draw(rt, "body"),
			IssuedAt: rapid.Int64().Draw(rt, "iat"), NotBefore: rapid.Int64Range(-1, 1).Draw(rt, "nbf"), ExpiresAt: rapid.Int64().Draw(rt, "exp"),
		}
		key := rapid.StringN(1, 40, -1).Draw(rt, "key")
		got, err := wire.Sign(key, c)
		require.NoError(rt, err)
		require.Equal(rt, signByEncoder(rt, key, c), got)
	})
}

// BenchmarkSign is the per-delivery signature.
func BenchmarkSign(b *testing.B) {
	body := []byte(strings.Repeat(`{"stepId":1,"out":"x"}`, 4))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = wire.Sign(testCurrentKey, wire.NewClaims(testURL, body, testNow(), "jwt_2hbE4v0kq9Qw3v8mYc1Xx7aZ"))
	}
}

// TestSignAllocationBudget keeps signing a delivery cheap: the token, its string and
// the HMAC sum (the reflective encoder and the JWT library took several times that).
func TestSignAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := []byte(`{"stepId":1,"out":"x"}`)
	c := wire.NewClaims(testURL, body, testNow(), "jwt_2hbE4v0kq9Qw3v8mYc1Xx7aZ")
	allocs := testing.AllocsPerRun(100, func() { _, _ = wire.Sign(testCurrentKey, c) })
	require.LessOrEqual(t, allocs, 3.0)
}
