//go:build race

package server

// raceEnabled: the race detector instruments allocations, so allocation
// budgets are not checked under it.
const raceEnabled = true
