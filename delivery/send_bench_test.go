package delivery

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/storage"
)

// An attempt's exchange: signing, the request's headers, the round trip through the
// delivery client and reading the answer, against a loopback endpoint in this process
// (whose net/http side is counted too).

// newSendBench returns an engine (not started) that signs with testKey, and a message
// to a loopback endpoint answering 200.
func newSendBench(tb testing.TB) (*Engine, *Message) {
	tb.Helper()
	store, err := storage.Open(filepath.Join(tb.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(tb, err)
	tb.Cleanup(func() { store.Close() })
	_, err = EnsureProject(context.Background(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "tokenhash")
	require.NoError(tb, err)
	e, err := New(Config{Destinations: netguard.Policy{Allow: netguard.LoopbackPrefixes()}, Logger: slog.New(slog.DiscardHandler)}, store)
	require.NoError(tb, err)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	tb.Cleanup(ep.Close)
	m := &Message{Project: testProject, ID: "msg_bench", Method: http.MethodPost, URL: ep.URL + "/hook", Retried: 1,
		Header: map[string][]string{"Content-Type": {"application/json"}, "X-Tenant": {"t1"}},
		Body:   []byte(`{"order":7,"items":["a","b","c"]}`)}
	return e, m
}

// BenchmarkSend is one attempt's exchange, both sides in this process.
func BenchmarkSend(b *testing.B) {
	e, m := newSendBench(b)
	b.ReportAllocs()
	for b.Loop() {
		if out := e.send(context.Background(), m, m.Body, time.Now()); out.Verdict != Delivered {
			b.Fatalf("verdict %v: %s", out.Verdict, out.Response.Error)
		}
	}
}

// TestSendAllocationBudget: an exchange, the endpoint's side included, stays within its
// allocations.
func TestSendAllocationBudget(t *testing.T) {
	e, m := newSendBench(t)
	require.Equal(t, Delivered, e.send(context.Background(), m, m.Body, time.Now()).Verdict)
	allocs := testing.AllocsPerRun(200, func() { e.send(context.Background(), m, m.Body, time.Now()) })
	t.Logf("%.0f allocations per exchange, both sides", allocs)
	require.LessOrEqual(t, allocs, 95.0) // 76 when written
}
