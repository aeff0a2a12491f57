package wire

import (
	"testing"

	"golang.org/x/net/http/httpguts"
)

// CheckHeaderValue is the sender's rule: for every byte, it refuses exactly what Go's
// HTTP client refuses.
func TestCheckHeaderValueIsTheSendersRule(t *testing.T) {
	for c := 0; c < 256; c++ {
		v := "a" + string([]byte{byte(c)}) + "b"
		if got, want := CheckHeaderValue(v) == nil, httpguts.ValidHeaderFieldValue(v); got != want {
			t.Errorf("byte 0x%02x: CheckHeaderValue accepts=%v, the sender accepts=%v", c, got, want)
		}
	}
}

func TestCheckHeaderNameIsTheSendersRule(t *testing.T) {
	for c := 0; c < 256; c++ {
		n := "X" + string([]byte{byte(c)}) + "y"
		if got, want := CheckHeaderName(n) == nil, httpguts.ValidHeaderFieldName(n); got != want {
			t.Errorf("byte 0x%02x: CheckHeaderName accepts=%v, the sender accepts=%v", c, got, want)
		}
	}
	if CheckHeaderName("") == nil {
		t.Error("an empty name is accepted")
	}
}
