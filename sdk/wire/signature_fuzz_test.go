package wire_test

import (
	"errors"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
)

// FuzzVerify feeds arbitrary tokens, bodies and URLs to Verify. It must never panic,
// every failure must carry one of the documented classes, and nothing but the exact
// seed token (with its own body and URL) may verify: forging a MAC is out of reach.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"step":1}`)
	valid, err := wire.Sign(testCurrentKey, wire.NewClaims(testURL, body, testNow(), "jwt_seed"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid, body, testURL)
	f.Add(valid, body, "")
	f.Add(valid, []byte("other"), testURL)
	f.Add("", []byte(nil), "")
	f.Add("a.b.c", []byte(nil), testURL)
	f.Add("eyJhbGciOiJub25lIn0.e30.", []byte{}, "")
	f.Add("....................................", []byte{}, "")
	f.Add("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjF9.AAAA", []byte{}, "")

	classes := []error{
		wire.ErrSignatureMissing, wire.ErrSignatureTooLarge, wire.ErrSignatureInvalid,
		wire.ErrSignatureExpired, wire.ErrSignatureNotYetValid, wire.ErrBodyMismatch,
		wire.ErrSubjectMismatch,
	}
	v := wire.Verifier{CurrentKey: testCurrentKey, NextKey: testNextKey}

	f.Fuzz(func(t *testing.T, token string, b []byte, url string) {
		err := v.Verify(token, b, url, testNow())
		if err == nil {
			if token != valid || string(b) != string(body) || (url != "" && url != testURL) {
				t.Fatalf("forged token verified: %q body %q url %q", token, b, url)
			}
			return
		}
		for _, c := range classes {
			if errors.Is(err, c) {
				return
			}
		}
		t.Fatalf("unclassified error: %v", err)
	})
}
