// Package flowctl owns the flow-control rules of Duraton: the per-key configuration a
// delivery carries (parallelism, rate, period) and, as the engine grows, the admission
// decisions over those limits. It is pure logic over values: it imports nothing of
// Duraton's and never reads a clock; callers pass `now`.
package flowctl
