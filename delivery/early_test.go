package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A run's delivery is a candidate for an early outcome only while it is the run's only
// one in flight and its outcome is not written yet; its end reports whether it was.
func TestFlightsSole(t *testing.T) {
	var f flights
	a := &Message{ID: "msg_a", Project: "p", RunID: "r"}
	b := &Message{ID: "msg_b", Project: "p", RunID: "r"}
	other := &Message{ID: "msg_o", Project: "p", RunID: "r2"}

	require.Nil(t, f.sole("p", "r"), "nothing in flight")
	fa := f.begin(a)
	require.Same(t, fa, f.sole("p", "r"))
	require.Nil(t, f.sole("q", "r"), "runs are per project")

	fb := f.begin(b)
	require.Nil(t, f.sole("p", "r"), "two in flight (parallel branches): the publisher is unknown")
	fo := f.begin(other)
	require.Same(t, fo, f.sole("p", "r2"))

	require.False(t, f.end(fa), "a's outcome was not written early")
	require.Same(t, fb, f.sole("p", "r"), "b is the run's only one again")
	f.markRecorded([]*flight{fb})
	require.Nil(t, f.sole("p", "r"), "an outcome is written early once")
	require.True(t, f.end(fb))
	require.False(t, f.end(fo))
	require.Empty(t, f.byRun, "ended flights leave nothing behind")
}
