package wire

import (
	"errors"
	"fmt"
	"strings"
)

// CheckHeaderValue reports why v cannot be sent as an HTTP header field value, or nil
// when it can: no control character but horizontal tab (so no CR, LF or NUL) and no
// DEL. It is the rule Go's HTTP client applies before it sends a request
// (httpguts.ValidHeaderFieldValue, which Duraton's sender also applies), so the server
// checks forwarded headers with it when it accepts a message: a value the sender would
// refuse is a 400 then, not an accepted message whose every attempt fails. The value
// itself is not quoted in the error: it may be a secret.
func CheckHeaderValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return fmt.Errorf("value has the control character 0x%02x at byte %d (only printable text and tabs may be sent)", c, i)
		}
	}
	return nil
}

// CheckHeaderName reports why name cannot be sent as an HTTP header field name (an RFC
// 9110 token), or nil when it can: the sender's rule (httpguts.ValidHeaderFieldName).
func CheckHeaderName(name string) error {
	if name == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(name); i++ {
		if !tokenByte(name[i]) {
			return fmt.Errorf("header name %q has the character 0x%02x, which a header name cannot have", name, name[i])
		}
	}
	return nil
}

func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
