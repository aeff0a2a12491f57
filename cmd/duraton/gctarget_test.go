package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetGCTarget: without GOGC the server runs at defaultGCPercent; with GOGC the
// operator's value stays.
func TestSetGCTarget(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	require.Equal(t, defaultGCPercent, setGCTarget(func(string) string { return "" }))
	require.Equal(t, defaultGCPercent, debug.SetGCPercent(defaultGCPercent))

	debug.SetGCPercent(150) // as GOGC=150 would have set it at start-up
	env := map[string]string{"GOGC": "150"}
	require.Equal(t, 150, setGCTarget(func(k string) string { return env[k] }))
	require.Equal(t, 150, debug.SetGCPercent(150))
}
