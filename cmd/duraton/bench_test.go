package main

import (
	"context"
	"testing"
)

// BenchmarkPublishDeliver runs the same in-process load as `duraton bench publish`:
// b.N messages from 64 clients, timed from the first publish to the last delivery.
func BenchmarkPublishDeliver(b *testing.B) {
	res, err := benchPublish(context.Background(), max(b.N, 100), 64, publishServer{}, func(int, int) {})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.DeliveredPerSec, "delivered/s")
	b.ReportMetric(res.LatencyP50Ms, "p50_ms")
}
