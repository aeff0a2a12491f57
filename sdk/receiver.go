package sdk

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// DefaultMaxBodyBytes is the body limit of Receiver.VerifyRequest when MaxBodyBytes is 0.
// A workflow delivery carries the run's whole history, so it is generous.
const DefaultMaxBodyBytes = 32 << 20

// Receiver verifies that a request comes from Duraton (or QStash): its Upstash-Signature must
// be an HS256 JWT signed with the current or the next signing key, unexpired, whose body claim
// is the hash of the received body (docs/protocol.md, "Verifying a delivery"). Trying both
// keys lets the keys rotate without downtime. The zero value has no keys and rejects
// everything.
type Receiver struct {
	// CurrentSigningKey is tried first, then NextSigningKey.
	CurrentSigningKey, NextSigningKey string
	// Leeway is the clock-skew tolerance on exp, nbf and iat. Zero means 30s; a negative
	// value means none.
	Leeway time.Duration
	// URL, when set, is the URL the token's sub claim must name (the URL the request was
	// sent to). Empty: the subject is not checked.
	URL string
	// MaxBodyBytes bounds the body VerifyRequest reads. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	now func() time.Time // nil: time.Now (tests set it)
}

// NewReceiverFromEnv returns a Receiver with the keys of QSTASH_CURRENT_SIGNING_KEY and
// QSTASH_NEXT_SIGNING_KEY.
func NewReceiverFromEnv() *Receiver {
	return &Receiver{
		CurrentSigningKey: os.Getenv("QSTASH_CURRENT_SIGNING_KEY"),
		NextSigningKey:    os.Getenv("QSTASH_NEXT_SIGNING_KEY"),
	}
}

// Verify checks signature (the Upstash-Signature header) against body. url, when not
// empty, is the subject the token must name; else r.URL is (when set). The error wraps
// one of the wire.ErrSignature* classes (wire.ErrNoSigningKey without keys); match it with
// errors.Is.
func (r *Receiver) Verify(signature string, body []byte, url string) error {
	_, err := r.verifyClaims(signature, body, url)
	return err
}

// verifyClaims is Verify returning the verified token's claims.
func (r *Receiver) verifyClaims(signature string, body []byte, url string) (wire.Claims, error) {
	if url == "" {
		url = r.URL
	}
	v := wire.Verifier{CurrentKey: r.CurrentSigningKey, NextKey: r.NextSigningKey, Leeway: r.Leeway}
	c, err := v.VerifyClaims(signature, body, url, r.clock())
	if err != nil {
		return wire.Claims{}, fmt.Errorf("sdk: verify signature: %w", err)
	}
	return c, nil
}

// VerifyRequest reads req's body (up to MaxBodyBytes, else ErrBodyTooLarge), verifies its
// Upstash-Signature as Verify does with r.URL, and returns the body. req.Body is replaced
// by a reader of the same bytes, so a handler can still read it.
func (r *Receiver) VerifyRequest(req *http.Request) ([]byte, error) {
	limit := r.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(req.Body, limit+1))
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("sdk: read request body: %w", err)
		}
		if int64(len(body)) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if err := r.Verify(req.Header.Get(wire.HeaderSignature), body, ""); err != nil {
		return nil, err
	}
	return body, nil
}

func (r *Receiver) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}
