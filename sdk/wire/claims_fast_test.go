package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestDecodeSignedClaimsIsUnmarshal: on payloads written by appendClaims from random
// claims, some of them mutated, the hand decoder either leaves the payload to
// encoding/json or decodes exactly what encoding/json decodes; and a payload of plain
// claims as Sign writes it is always decoded by hand.
func TestDecodeSignedClaimsIsUnmarshal(t *testing.T) {
	plainText := rapid.StringMatching(`[ -!#-\[\]-~]{0,12}`) // printable ASCII but " and \
	anyText := rapid.OneOf(plainText, rapid.String(), rapid.SampledFrom([]string{`a"b`, `a\b`, "\u2028", "é", "\x00"}))
	within := rapid.Int64Range(-1e15+1, 1e15-1)
	when := rapid.OneOf(within, within, within, within, within, rapid.SampledFrom([]int64{0, 1_700_000_000, 1e15, -1e15, 1 << 53, 1<<63 - 1}))
	fast := 0
	rapid.Check(t, func(rt *rapid.T) {
		text := plainText
		if rapid.IntRange(0, 3).Draw(rt, "anyText") == 0 {
			text = anyText
		}
		c := Claims{Issuer: text.Draw(rt, "iss"), Subject: text.Draw(rt, "sub"), ID: text.Draw(rt, "jti"), Body: text.Draw(rt, "body"),
			IssuedAt: when.Draw(rt, "iat"), NotBefore: when.Draw(rt, "nbf"), ExpiresAt: when.Draw(rt, "exp")}
		raw, err := appendClaims(nil, &c)
		require.NoError(rt, err)
		mutation := rapid.IntRange(0, 6).Draw(rt, "mutation") // 0 and 4-6: none
		switch mutation {
		case 1: // a byte replaced
			i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
			raw[i] = rapid.SampledFrom([]byte(`{}":, -0123x\.eE`)).Draw(rt, "byte")
		case 2: // a byte removed
			i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
			raw = append(raw[:i:i], raw[i+1:]...)
		case 3: // something inserted
			i := rapid.IntRange(0, len(raw)).Draw(rt, "at")
			ins := rapid.SampledFrom([]string{" ", ",", `"iss":"x",`, `"exp":1,`, `"aud":"a",`, `.5`, `e1`, `0`, `-`}).Draw(rt, "insert")
			raw = append(raw[:i:i], append([]byte(ins), raw[i:]...)...)
		}
		got, ok := decodeSignedClaims(raw)
		var tc tokenClaims
		unmarshalErr := json.Unmarshal(raw, &tc)
		if !ok {
			if (mutation == 0 || mutation > 3) && plainClaims(&c) {
				rt.Fatalf("a payload as Sign writes it was left to encoding/json: %s", raw)
			}
			return
		}
		fast++
		require.NoError(rt, unmarshalErr, "decoded by hand, refused by encoding/json: %s", raw)
		want := tc.checked()
		require.Equal(rt, want.out(), got.out(), "%s", raw)
		require.Equal(rt, []bool{want.hasIat, want.hasNbf, want.hasExp}, []bool{got.hasIat, got.hasNbf, got.hasExp})
		for i, pair := range [][2]time.Time{{want.iat, got.iat}, {want.nbf, got.nbf}, {want.exp, got.exp}} {
			require.True(rt, pair[0].Equal(pair[1]), "time claim %d of %s: %v, want %v", i, raw, pair[1], pair[0])
		}
	})
	t.Logf("%d payloads decoded by hand", fast)

	// The claims of a delivery, as the server signs them, are decoded by hand.
	c := NewClaims("https://a.example/wf", []byte("b"), time.Unix(1_700_000_000, 0), "jwt_1")
	raw, err := appendClaims(nil, &c)
	require.NoError(t, err)
	got, ok := decodeSignedClaims(raw)
	require.True(t, ok)
	require.Equal(t, c, got.out())
}

// plainClaims reports whether c's strings are printable ASCII but " and \ and its
// times have at most 15 digits.
func plainClaims(c *Claims) bool {
	for _, s := range []string{c.Issuer, c.Subject, c.ID, c.Body} {
		for i := 0; i < len(s); i++ {
			if b := s[i]; b < 0x20 || b >= 0x7f || b == '"' || b == '\\' {
				return false
			}
		}
	}
	for _, n := range []int64{c.IssuedAt, c.NotBefore, c.ExpiresAt} {
		if n <= -1e15 || n >= 1e15 {
			return false
		}
	}
	return true
}

// BenchmarkDecodeClaims is the claims of a delivery's token: encoding/json into the
// library's claims, and by hand.
func BenchmarkDecodeClaims(b *testing.B) {
	c := NewClaims("https://a.example/wf", []byte("b"), time.Unix(1_700_000_000, 0), "jwt_2n1bY4RLLt5Zc9pX")
	raw, _ := appendClaims(nil, &c)
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var tc tokenClaims
			_ = json.Unmarshal(raw, &tc)
		}
	})
	b.Run("Signed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodeSignedClaims(raw)
		}
	})
}
