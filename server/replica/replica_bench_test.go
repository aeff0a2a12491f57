package replica

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkForward: one small publish forwarded over loopback HTTP, both hops real
// (client → follower → leader), to see what a follower costs per request.
func BenchmarkForward(b *testing.B) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"messageId":"msg_0123456789abcdef"}`))
	}))
	defer leader.Close()
	f, err := New(Config{Self: "r-bench", Secret: "s", Leader: (&leaderStub{addr: leader.URL}).get})
	if err != nil {
		b.Fatal(err)
	}
	follower := httptest.NewServer(f)
	defer follower.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := bytes.Repeat([]byte("x"), 200)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, follower.URL+"/v2/publish/https://example.com/x", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer tok")
			req.Header.Set("Content-Type", "text/plain")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
