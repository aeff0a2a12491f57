package server

import (
	"testing"

	"pgregory.net/rapid"
)

// The hand-written check accepts exactly what the documented pattern does.
func TestRunIDCharsMatchesPattern(t *testing.T) {
	t.Parallel()
	for c := 0; c < 256; c++ {
		id := "a" + string([]byte{byte(c)}) + "z"
		if got, want := runIDChars(id), runIDPattern.MatchString(id); got != want {
			t.Fatalf("byte %#x: runIDChars %v, pattern %v", c, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[a-zA-Z0-9\-_.:/ é\x00]{1,20}`).Draw(t, "id")
		if got, want := runIDChars(id), runIDPattern.MatchString(id); got != want {
			t.Fatalf("%q: runIDChars %v, pattern %v", id, got, want)
		}
	})
}
