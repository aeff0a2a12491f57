package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// BenchmarkRunSearchHour: 100,000 native runs of 4 workflows over 25 hours (1,000 of
// each workflow per hour, each with its payload and two steps); one GET /runs of one
// workflow's hour (a page of 100, through HTTP on loopback), without and with a q
// condition. Run with
//
//	go test ./server -run '^$' -bench BenchmarkRunSearchHour -benchtime 50x
func BenchmarkRunSearchHour(b *testing.B) {
	const (
		runs      = 100_000
		workflows = 4
		hours     = 25
	)
	dir := b.TempDir()
	store, err := storage.Open(filepath.Join(dir, "duraton.db"), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	if _, err := delivery.EnsureProject(ctx, store, delivery.Project{ID: testProject, Name: testProject,
		CurrentSigningKey: testCurrentKey, NextSigningKey: testNextKey}, TokenHash(testToken)); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	step := int64(hours) * int64(time.Hour/time.Millisecond) / runs
	for batch := 0; batch < runs; batch += 5000 {
		err := store.Update(func(tx *storage.Tx) error {
			for i := batch; i < batch+5000; i++ {
				wf := fmt.Sprintf("wf.%d", i%workflows)
				created := t0 + int64(i)*step
				r := &storage.Run{ID: fmt.Sprintf("wfr_%08d", i), URL: "http://127.0.0.1:1/wf", CreatedAt: created, EndedAt: created + 50,
					State: storage.RunSuccess, Workflow: wf, App: "app", EventName: "acct.sync",
					Header: map[string][]string{wire.HeaderDuratonWorkflow: {wf}, wire.HeaderDuratonApp: {"app"}}}
				payload := fmt.Appendf(nil, `{"id":"evt_%d","name":"acct.sync","data":{"accountId":"a%d"},"ts":%d,"events":[{"id":"evt_%d"}]}`, i, i%100, created, i)
				entries := [][]byte{payload,
					[]byte(`{"stepId":1,"stepName":"fetch","stepType":"Run","out":"{\"v\":1}","concurrent":1}`),
					[]byte(`{"stepId":2,"stepName":"save","stepType":"Run","out":"\"ok\"","concurrent":1}`)}
				for seq, body := range entries {
					if err := tx.PutHistory(testProject, r.ID, seq, &storage.HistoryEntry{MessageID: fmt.Sprintf("msg_%d_%d", i, seq), Body: body, CallType: storage.CallStep, CreatedAt: created + int64(seq)*10}); err != nil {
						return err
					}
					r.HistoryLen++
					r.HistoryBytes += int64(len(body))
				}
				if err := tx.IndexRun(testProject, r); err != nil {
					return err
				}
				if err := tx.PutRun(testProject, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	policy := netguard.Policy{Allow: netguard.LoopbackPrefixes()}
	engine, err := delivery.New(delivery.Config{Destinations: policy, Logger: quiet}, store)
	if err != nil {
		b.Fatal(err)
	}
	nat, err := native.New(native.Config{CheckURL: policy.CheckURL}, store, engine)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Native: nat, CheckDestination: policy.CheckURL, Logger: quiet}, engine)
	if err != nil {
		b.Fatal(err)
	}
	api := httptest.NewServer(srv.Handler())
	b.Cleanup(api.Close)

	hour := int64(time.Hour / time.Millisecond)
	from := t0 + 10*hour
	base := fmt.Sprintf("%s/runs?workflow=wf.1&from=%d&to=%d", api.URL, from, from+hour-1)
	for _, c := range []struct{ name, url string }{
		{"hour", base},
		// q over the hour's 1,000 runs of wf.1 (10 match): one page examines them all.
		{"hour+q", base + "&q=" + neturl.QueryEscape(`event.data.accountId == "a1"`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			get := func() {
				req, _ := http.NewRequest(http.MethodGet, c.url, nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET /runs: %d %s", resp.StatusCode, body)
				}
			}
			get()
			for b.Loop() {
				get()
			}
		})
	}
}
