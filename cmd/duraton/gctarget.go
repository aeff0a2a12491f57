package main

import "runtime/debug"

// defaultGCPercent is the garbage collector's target when GOGC is not set: the heap
// may grow to 5× the live data before a collection instead of 2×. Duraton's live heap
// is small (the scheduler's queue, caches) next to what each request allocates, so at
// Go's default of 100 the collector took ~15 % of the server's CPU per workflow step;
// at 400 it takes a quarter of that (bench workflow --endpoint=external: ~400 → ~345 µs
// of server CPU per step). Set GOGC (and GOMEMLIMIT) to choose otherwise.
const defaultGCPercent = 400

// setGCTarget applies defaultGCPercent unless the operator set GOGC. It returns the
// percentage in force.
func setGCTarget(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(-1) // read the runtime's (GOGC's) value …
		debug.SetGCPercent(p)       // … and put it back
		return p
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
