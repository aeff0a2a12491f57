// Package aimeter owns the metering of AI steps (docs/protocol.md, "AI steps and spend
// controls"): a workflow call Duraton executes against an OpenAI- or Anthropic-compatible
// API has its usage read from the answer and priced (Meter), the run's cap checked before
// the call leaves (Stop), and the tokens its run spends kept in the run's tokenThrottle
// bucket (the *Tx functions).
//
// It reads and writes records only through the storage.Tx it is given: the delivery
// engine owns the transactions, and applies the bucket changes (Adj) to its scheduler.
package aimeter
