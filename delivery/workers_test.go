package delivery

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

func startOf(id string) sched.Start { return sched.Start{Entry: storage.DueEntry{MessageID: id}} }

// runOnly is an attempt that never returns a start to run next.
func runOnly(run func(sched.Start)) func(sched.Start) (sched.Start, bool) {
	return func(st sched.Start) (sched.Start, bool) { run(st); return sched.Start{}, false }
}

// TestWorkersReuseAWaitingWorker: a start handed over while a worker waits runs on that
// worker; no goroutine is started for it.
func TestWorkersReuseAWaitingWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ran []string
		w := newWorkers(runOnly(func(st sched.Start) { ran = append(ran, st.Entry.MessageID) }), time.Minute)
		w.start(startOf("a"))
		synctest.Wait() // the worker ran a and waits
		w.start(startOf("b"))
		synctest.Wait()
		w.start(startOf("c"))
		synctest.Wait()
		require.Equal(t, []string{"a", "b", "c"}, ran)
		require.EqualValues(t, 1, w.spawned.Load())
		w.stop()
	})
}

// TestWorkersRunTheStartAnAttemptReturns: an attempt that returns a start (its run's
// next step) has it run next on the same worker, before any start handed over.
func TestWorkersRunTheStartAnAttemptReturns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var ran []string
		w := newWorkers(func(st sched.Start) (sched.Start, bool) {
			id := st.Entry.MessageID
			ran = append(ran, id)
			if len(id) < 3 {
				return startOf(id + "+"), true
			}
			return sched.Start{}, false
		}, time.Minute)
		w.start(startOf("a"))
		synctest.Wait()
		w.start(startOf("b"))
		synctest.Wait()
		require.Equal(t, []string{"a", "a+", "a++", "b", "b+", "b++"}, ran)
		require.EqualValues(t, 1, w.spawned.Load(), "one worker ran all of them")
		w.stop()
	})
}

// TestWorkersNeverWaitForABusyWorker: while every worker is in an attempt, a start gets
// a new worker at once, so attempts run side by side as before.
func TestWorkersNeverWaitForABusyWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var running atomic.Int64
		w := newWorkers(runOnly(func(sched.Start) { running.Add(1); <-release; running.Add(-1) }), time.Minute)
		for _, id := range []string{"a", "b", "c"} {
			w.start(startOf(id))
		}
		synctest.Wait()
		require.EqualValues(t, 3, running.Load())
		require.EqualValues(t, 3, w.spawned.Load())
		close(release)
		synctest.Wait()
		require.EqualValues(t, 0, running.Load())
		w.start(startOf("d")) // three workers wait: one of them takes it
		synctest.Wait()
		require.EqualValues(t, 3, w.spawned.Load())
		w.stop()
	})
}

// TestWorkersEndWhenIdle: a worker that waited idle for a start ends; the next start
// gets a new one.
func TestWorkersEndWhenIdle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		runs := 0
		w := newWorkers(runOnly(func(sched.Start) { runs++ }), time.Second)
		w.start(startOf("a"))
		time.Sleep(2 * time.Second)
		synctest.Wait() // the worker has ended
		w.start(startOf("b"))
		synctest.Wait()
		require.Equal(t, 2, runs)
		require.EqualValues(t, 2, w.spawned.Load())
		w.stop()
	})
}

// TestWorkersStopEndsWaitingWorkers: stop returns once the waiting workers have ended,
// long before their idle wait (goleak checks none is left).
func TestWorkersStopEndsWaitingWorkers(t *testing.T) {
	t.Parallel()
	done := make(chan struct{}, 2)
	w := newWorkers(runOnly(func(sched.Start) { done <- struct{}{} }), time.Hour)
	w.start(startOf("a"))
	w.start(startOf("b"))
	<-done
	<-done
	w.stop()
}

// deepAttempt stands for an attempt's stack: a few kilobytes of frames, as net/http,
// bbolt and signing make.
//
//go:noinline
func deepAttempt(depth int) byte {
	var frame [512]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return frame[0]
	}
	return deepAttempt(depth-1) + frame[depth%len(frame)]
}

// BenchmarkLaunch is one attempt started and finished: on a goroutine of its own (as
// before the workers) and on a worker.
func BenchmarkLaunch(b *testing.B) {
	done := make(chan struct{})
	run := func(sched.Start) { deepAttempt(32); done <- struct{}{} }
	b.Run("Goroutine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			go run(sched.Start{})
			<-done
		}
	})
	b.Run("Workers", func(b *testing.B) {
		b.ReportAllocs()
		w := newWorkers(runOnly(run), time.Minute)
		for b.Loop() {
			w.start(sched.Start{})
			<-done
		}
		w.stop()
	})
}
