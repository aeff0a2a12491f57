package storage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// throttledWriter takes bytesPerSec: a slow backup download.
type throttledWriter struct {
	bytesPerSec int
	start       time.Time
	written     int
}

func (w *throttledWriter) Write(p []byte) (int, error) {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	w.written += len(p)
	due := w.start.Add(time.Duration(float64(w.written) / float64(w.bytesPerSec) * float64(time.Second)))
	time.Sleep(time.Until(due))
	return len(p), nil
}

// BenchmarkCommitDuringBackup measures the latency of small commits (one every
// millisecond) for 3 s, while a second writer grows the data file past its mapping
// (64 KiB every 5 ms), with and without a backup being downloaded at 2 MiB/s meanwhile.
// Reported: p50, p99 and max commit latency in µs. Run:
//
//	go test ./storage -run '^$' -bench CommitDuringBackup -benchtime 1x
func BenchmarkCommitDuringBackup(b *testing.B) {
	for _, backup := range []bool{false, true} {
		name := "no-backup"
		if backup {
			name = "throttled-backup"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				lat := commitLatencies(b, backup)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
			}
		})
	}
}

func commitLatencies(b *testing.B, backup bool) []time.Duration {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "d.db"), Options{InitialMmapBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	big := bytes.Repeat([]byte("v"), 64<<10)
	put := func(id string, body []byte) error {
		return s.Update(func(tx *Tx) error {
			if id == "" {
				return tx.CreateProject(&Project{ID: "p"})
			}
			return tx.PutMessage(&Message{ID: id, Project: "p", URL: "http://x.test/", Body: body})
		})
	}
	if err := put("", nil); err != nil {
		b.Fatal(err)
	}
	for i := range 96 { // 6 MiB
		if err := put(fmt.Sprintf("fill_%04d", i), big); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	if backup {
		wg.Go(func() {
			if _, err := s.Backup(&throttledWriter{bytesPerSec: 2 << 20}, func(int64) {}); err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() { // grows the file
		for i := 0; ctx.Err() == nil; i++ {
			if err := put(fmt.Sprintf("grow_%05d", i), big); err != nil {
				errs <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	var lat []time.Duration
	small := bytes.Repeat([]byte("s"), 1024)
	for i := 0; ctx.Err() == nil; i++ {
		t0 := time.Now()
		if err := put(fmt.Sprintf("small_%06d", i), small); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	slices.Sort(lat)
	return lat
}
