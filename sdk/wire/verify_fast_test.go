package wire

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestFastVerifyAgreesWithTheLibrary: on tokens made by Sign with random claims, keys,
// clocks, leeways and URLs, some of them tampered with, the fast path accepts exactly
// the Sign-shaped tokens the JWT library accepts, with the same claims; it never accepts
// what the library refuses.
func TestFastVerifyAgreesWithTheLibrary(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	accepted := 0
	rapid.Check(t, func(rt *rapid.T) {
		body := []byte(rapid.StringN(0, 20, -1).Draw(rt, "body"))
		v := Verifier{CurrentKey: rapid.StringN(1, 20, -1).Draw(rt, "current"),
			NextKey: rapid.SampledFrom([]string{"", "next_key"}).Draw(rt, "next"),
			Leeway:  rapid.SampledFrom([]time.Duration{0, -1, 5 * time.Second}).Draw(rt, "leeway")}
		at := func(name string) int64 {
			if rapid.IntRange(0, 7).Draw(rt, name+"Missing") == 0 {
				return 0
			}
			if name == "exp" {
				return base.Unix() + rapid.Int64Range(-100, 400).Draw(rt, name)
			}
			return base.Unix() + rapid.Int64Range(-400, 100).Draw(rt, name)
		}
		c := Claims{
			Issuer:   rapid.SampledFrom([]string{Issuer, Issuer, Issuer, Issuer, "Other", ""}).Draw(rt, "iss"),
			Subject:  rapid.SampledFrom([]string{"https://a/wf", "https://a/wf", "https://b/wf", ""}).Draw(rt, "sub"),
			ID:       rapid.StringMatching(`jwt_[a-z]{0,5}`).Draw(rt, "jti"),
			Body:     rapid.SampledFrom([]string{BodyHash(body), BodyHash(body), BodyHash(body), BodyHash(body) + "=", BodyHash([]byte("other")), ""}).Draw(rt, "bodyClaim"),
			IssuedAt: at("iat"), NotBefore: at("nbf"), ExpiresAt: at("exp"),
		}
		key := rapid.SampledFrom([]string{v.CurrentKey, v.CurrentKey, "next_key", "wrong"}).Draw(rt, "signKey")
		tok, err := Sign(key, c)
		require.NoError(rt, err)
		switch rapid.IntRange(0, 9).Draw(rt, "tamper") {
		case 1: // another header
			tok = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"1"}`)) + tok[len(jwtHeader):]
		case 2: // one character changed
			i := rapid.IntRange(0, len(tok)-1).Draw(rt, "at")
			tok = tok[:i] + rapid.SampledFrom([]string{"A", "_", ".", "=", "-"}).Draw(rt, "char") + tok[i+1:]
		case 3:
			tok += rapid.SampledFrom([]string{".", "A", "=", ".x"}).Draw(rt, "suffix")
		}
		now := base.Add(time.Duration(rapid.Int64Range(-60, 60).Draw(rt, "now")) * time.Second)
		url := rapid.SampledFrom([]string{"", "https://a/wf", "https://a/wf", "https://b/wf"}).Draw(rt, "url")

		fast, ok := v.fastVerify(tok, body, url, now)
		slow, slowErr := v.parseVerify(tok, body, url, now, v.keys())
		if ok {
			require.NoError(rt, slowErr, "the fast path accepted a token the library refuses")
			require.Equal(rt, slow, fast)
			accepted++
			return
		}
		if slowErr == nil && len(tok) > len(jwtHeader) && tok[:len(jwtHeader)+1] == jwtHeader+"." {
			rt.Fatalf("the library accepts a Sign-shaped token the fast path left to it: %q", tok)
		}
	})
	t.Logf("the fast path accepted %d of the random tokens", accepted)

	// Valid tokens with random content: the fast path takes every one, with the
	// library's claims.
	rapid.Check(t, func(rt *rapid.T) {
		body := []byte(rapid.String().Draw(rt, "body"))
		iat := base.Unix() + rapid.Int64Range(-200, 0).Draw(rt, "iat")
		c := Claims{Issuer: Issuer, Subject: rapid.String().Draw(rt, "sub"), ID: rapid.String().Draw(rt, "jti"),
			Body: BodyHash(body), IssuedAt: iat, NotBefore: iat, ExpiresAt: iat + 300}
		v := Verifier{CurrentKey: rapid.StringN(1, 30, -1).Draw(rt, "current"), NextKey: rapid.StringN(0, 30, -1).Draw(rt, "next")}
		key := v.CurrentKey
		if v.NextKey != "" && rapid.Bool().Draw(rt, "signWithNext") {
			key = v.NextKey
		}
		tok, err := Sign(key, c)
		require.NoError(rt, err)
		fast, ok := v.fastVerify(tok, body, c.Subject, base)
		require.True(rt, ok)
		slow, err := v.parseVerify(tok, body, c.Subject, base, v.keys())
		require.NoError(rt, err)
		require.Equal(rt, slow, fast)
		require.Equal(rt, c, fast)
	})

	// And it is the path a token as Sign makes it takes.
	body := []byte("b")
	c := NewClaims("https://a/wf", body, base, "jwt_1")
	for _, key := range []string{"cur", "next"} {
		tok, err := Sign(key, c)
		require.NoError(t, err)
		got, ok := Verifier{CurrentKey: "cur", NextKey: "next"}.fastVerify(tok, body, "https://a/wf", base)
		require.True(t, ok, "signed with %s", key)
		require.Equal(t, c, got)
	}
}

// BenchmarkVerify is a delivery's signature check in the SDK.
func BenchmarkVerify(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`[{"messageId":"m","body":"e30=","callType":"step"}]`)
	tok, _ := Sign("sig_current", NewClaims("https://a/wf", body, now, "jwt_1"))
	v := Verifier{CurrentKey: "sig_current", NextKey: "sig_next"}
	b.Run("Library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = v.parseVerify(tok, body, "", now, v.keys())
		}
	})
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = v.VerifyClaims(tok, body, "", now)
		}
	})
}
