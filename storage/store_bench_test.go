package storage

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkGroupCommit measures durable single-message publishes from many goroutines:
// each Update is one message record, its due entry and a log event.
func BenchmarkGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(map[int]string{1: "Writers1", 64: "Writers64"}[writers], func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := &Project{ID: "p"}
			if err := s.Update(func(tx *Tx) error { return tx.CreateProject(p) }); err != nil {
				b.Fatal(err)
			}
			var ids IDGen
			body := make([]byte, 200)
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/writers + 1
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						now := time.Now()
						m := &Message{ID: ids.New(PrefixMessage, now), Project: "p", URL: "http://127.0.0.1:1/x", Method: "POST", Body: body, DueAt: now.UnixNano(), Retries: 3,
							Header: map[string][]string{"Content-Type": {"text/plain"}}}
						ev := &LogEvent{ID: ids.New(PrefixLog, now), MessageID: m.ID, State: StateCreated}
						if err := s.Update(func(tx *Tx) error {
							if err := tx.PutMessage(m); err != nil {
								return err
							}
							if err := tx.PutDue(DueOf(m)); err != nil {
								return err
							}
							return tx.AppendLog("p", ev)
						}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			st := s.Stats()
			b.ReportMetric(float64(st.Ops)/float64(st.Commits), "ops/commit")
			b.ReportMetric(float64(st.CommitTime.Microseconds())/float64(st.Commits), "µs/commit")
		})
	}
}
