//go:build race

package wire_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation
// budgets are not checked under it.
const raceEnabled = true
