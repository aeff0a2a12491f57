// Package flowctl owns the flow-control rules of Duraton: the per-key configuration a
// delivery carries (parallelism, rate, period), the state of a key (slots in use, the
// exact sliding window of recent starts, pause and pins) and the admission decision of a
// delivery over all the constraints that apply to it.
//
// Admission is two-phase: every constraint is checked first, and only if all have room
// are they all taken; a blocked check spends nothing. A blocked constraint says when it
// may admit again (a rate window) or that it waits for a release (a slot).
//
// flowctl is pure logic over values: it imports nothing of Duraton's, keeps no clock
// (callers pass `now`) and does no I/O. It is not safe for concurrent use; the
// dispatcher serialises access.
package flowctl
