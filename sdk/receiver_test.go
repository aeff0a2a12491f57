package sdk

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

const (
	testCurrentKey = "sig_current_key"
	testNextKey    = "sig_next_key"
	testURL        = "https://app.example/api/hook"
)

// receiverAt returns a Receiver with the test keys whose clock reads now.
func receiverAt(now time.Time) *Receiver {
	return &Receiver{CurrentSigningKey: testCurrentKey, NextSigningKey: testNextKey, now: func() time.Time { return now }}
}

// signTest signs body for url at t with key, failing the test on error.
func signTest(t testing.TB, key, url string, body []byte, at time.Time) string {
	t.Helper()
	tok, err := wire.Sign(key, wire.NewClaims(url, body, at, "jwt_test"))
	require.NoError(t, err)
	return tok
}

// signWith signs arbitrary claims with any method (for forged tokens).
func signWith(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return tok
}

func TestReceiverVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	body := []byte(`{"hello":"world"}`)
	fullClaims := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "Upstash", "sub": testURL, "iat": now.Unix(), "nbf": now.Unix(),
			"exp": now.Add(5 * time.Minute).Unix(), "jti": "j", "body": wire.BodyHash(body)}
	}
	without := func(name string) jwt.MapClaims { c := fullClaims(); delete(c, name); return c }

	tests := []struct {
		name      string
		receiver  *Receiver
		signature string
		body      []byte
		url       string
		wantErr   error // nil: accepted
	}{
		{"CurrentKey", receiverAt(now), signTest(t, testCurrentKey, testURL, body, now), body, "", nil},
		{"NextKey", receiverAt(now), signTest(t, testNextKey, testURL, body, now), body, "", nil},
		{"WithinLeeway", receiverAt(now.Add(5*time.Minute + 10*time.Second)), signTest(t, testCurrentKey, testURL, body, now), body, "", nil},
		{"SubjectMatches", receiverAt(now), signTest(t, testCurrentKey, testURL, body, now), body, testURL, nil},
		{"EmptyBody", receiverAt(now), signTest(t, testCurrentKey, testURL, nil, now), nil, "", nil},
		{"Forged", receiverAt(now), signTest(t, "sig_attacker", testURL, body, now), body, "", wire.ErrSignatureInvalid},
		{"Expired", receiverAt(now.Add(10 * time.Minute)), signTest(t, testCurrentKey, testURL, body, now), body, "", wire.ErrSignatureExpired},
		{"NotYetValid", receiverAt(now.Add(-10 * time.Minute)), signTest(t, testCurrentKey, testURL, body, now), body, "", wire.ErrSignatureNotYetValid},
		{"WrongKeys", &Receiver{CurrentSigningKey: "a", NextSigningKey: "b", now: func() time.Time { return now }}, signTest(t, testCurrentKey, testURL, body, now), body, "", wire.ErrSignatureInvalid},
		{"WrongAlgorithm", receiverAt(now), signWith(t, jwt.SigningMethodHS512, []byte(testCurrentKey), fullClaims()), body, "", wire.ErrSignatureInvalid},
		{"AlgNone", receiverAt(now), signWith(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, fullClaims()), body, "", wire.ErrSignatureInvalid},
		{"TamperedBody", receiverAt(now), signTest(t, testCurrentKey, testURL, body, now), []byte(`{"hello":"world!"}`), "", wire.ErrBodyMismatch},
		{"MissingExp", receiverAt(now), signWith(t, jwt.SigningMethodHS256, []byte(testCurrentKey), without("exp")), body, "", wire.ErrSignatureInvalid},
		{"MissingIss", receiverAt(now), signWith(t, jwt.SigningMethodHS256, []byte(testCurrentKey), without("iss")), body, "", wire.ErrSignatureInvalid},
		{"MissingBody", receiverAt(now), signWith(t, jwt.SigningMethodHS256, []byte(testCurrentKey), without("body")), body, "", wire.ErrBodyMismatch},
		{"Malformed", receiverAt(now), "not.a.jwt", body, "", wire.ErrSignatureInvalid},
		{"Missing", receiverAt(now), "", body, "", wire.ErrSignatureMissing},
		{"NoKeys", &Receiver{}, signTest(t, testCurrentKey, testURL, body, now), body, "", wire.ErrNoSigningKey},
		{"SubjectMismatchArgument", receiverAt(now), signTest(t, testCurrentKey, testURL, body, now), body, "https://other.example/", wire.ErrSubjectMismatch},
		{"SubjectMismatchField", func() *Receiver { r := receiverAt(now); r.URL = "https://other.example/"; return r }(),
			signTest(t, testCurrentKey, testURL, body, now), body, "", wire.ErrSubjectMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.receiver.Verify(tt.signature, tt.body, tt.url)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestReceiverVerifyRequest(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	body := []byte("payload")

	newRequest := func(sig string, b []byte) *http.Request {
		req := httptest.NewRequest(http.MethodPost, testURL, bytes.NewReader(b))
		req.Header.Set("Upstash-Signature", sig)
		return req
	}

	t.Run("Accepted", func(t *testing.T) {
		t.Parallel()
		r := receiverAt(now)
		r.URL = testURL
		req := newRequest(signTest(t, testCurrentKey, testURL, body, now), body)
		got, err := r.VerifyRequest(req)
		require.NoError(t, err)
		require.Equal(t, body, got)
		again, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		require.Equal(t, body, again, "the body can be read again")
	})

	t.Run("Rejected", func(t *testing.T) {
		t.Parallel()
		req := newRequest(signTest(t, testCurrentKey, testURL, body, now), []byte("other"))
		_, err := receiverAt(now).VerifyRequest(req)
		require.ErrorIs(t, err, wire.ErrBodyMismatch)
	})

	t.Run("TooLarge", func(t *testing.T) {
		t.Parallel()
		r := receiverAt(now)
		r.MaxBodyBytes = 4
		req := newRequest(signTest(t, testCurrentKey, testURL, body, now), body)
		_, err := r.VerifyRequest(req)
		require.ErrorIs(t, err, ErrBodyTooLarge)
	})
}

func TestNewReceiverFromEnv(t *testing.T) {
	t.Setenv("QSTASH_CURRENT_SIGNING_KEY", "cur")
	t.Setenv("QSTASH_NEXT_SIGNING_KEY", "next")
	r := NewReceiverFromEnv()
	require.Equal(t, "cur", r.CurrentSigningKey)
	require.Equal(t, "next", r.NextSigningKey)
}

// FuzzReceiverVerify: Verify never panics on any input, and whatever it accepts is bound
// to the body: the same signature over a different body is rejected.
func FuzzReceiverVerify(f *testing.F) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"a":1}`)
	f.Add(signTest(f, testCurrentKey, testURL, body, now), body, "")
	f.Add(signTest(f, testNextKey, testURL, body, now), body, testURL)
	f.Add(signTest(f, testCurrentKey, testURL, nil, now), []byte{}, "x")
	f.Add("eyJhbGciOiJub25lIn0.e30.", body, "")
	f.Add(strings.Repeat("a.", 100), []byte{0xff}, "")
	r := receiverAt(now)
	f.Fuzz(func(t *testing.T, signature string, body []byte, url string) {
		if err := r.Verify(signature, body, url); err != nil {
			return
		}
		tampered := append(bytes.Clone(body), '!')
		require.ErrorIs(t, r.Verify(signature, tampered, url), wire.ErrBodyMismatch)
	})
}
