package h1

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkRoundTrip compares h1 with net/http's Transport on loopback: 64 concurrent
// senders POST 600 bytes and read a 200-byte answer, as deliveries do.
//
//	go test -run '^$' -bench RoundTrip -benchtime 3s ./delivery/h1/
func BenchmarkRoundTrip(b *testing.B) {
	const senders = 64
	reqBody := bytes.Repeat([]byte("r"), 600)
	answer := []byte(strings.Repeat("a", 200))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(srv.Close)

	dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	std := &http.Transport{DialContext: dial, MaxIdleConns: 4 * senders, MaxIdleConnsPerHost: senders,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	b.Cleanup(std.CloseIdleConnections)
	fast, err := New(Config{Dial: dial, Fallback: std})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fast.CloseIdleConnections)

	for _, tc := range []struct {
		name string
		tr   http.RoundTripper
	}{{"h1", fast}, {"net-http", std}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism((senders + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 512)
				for pb.Next() {
					req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(reqBody))
					if err != nil {
						b.Error(err)
						return
					}
					resp, err := tc.tr.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					n, err := io.ReadFull(resp.Body, buf)
					_ = resp.Body.Close()
					if n != len(answer) || err != io.ErrUnexpectedEOF || resp.StatusCode != http.StatusOK {
						b.Errorf("answer: %d %d bytes, %v", resp.StatusCode, n, err)
						return
					}
				}
			})
		})
	}
}
