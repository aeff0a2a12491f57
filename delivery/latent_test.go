package delivery

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

// The tests of this file each pin one bug found in a review of the engine (issue 8,
// "latent bugs"); each failed before its fix.

// setupWrapped starts an engine over a store wrapped by wrap (Twice, Faults, ...).
func setupWrapped[S Store](t *testing.T, cfg Config, wrap func(*storage.Store) S) (*testBundle, S) {
	t.Helper()
	store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	_, err = EnsureProject(t.Context(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "tokenhash")
	require.NoError(t, err)
	wrapped := wrap(store)
	b := &testBundle{store: store, recorded: &deliverytest.Signal[recorded]{}}
	cfg.Hooks.Recorded = b.signal
	b.engine = startEngine(t, wrapped, cfg)
	t.Cleanup(func() { b.engine.Stop(); store.Close() })
	return b, wrapped
}

func (b *testBundle) pending(t *testing.T, id string) bool {
	t.Helper()
	_, err := b.engine.Message(t.Context(), testProject, id)
	if err == nil {
		return true
	}
	require.ErrorIs(t, err, storage.ErrNotFound)
	return false
}

// Bug 1: record ran twice (a neighbour in the group failed) kept the follow-up entries of
// its first run; the dispatcher got the callback twice and the carried-body budget it
// accounted for them was never given back.
func TestLatentRecordRunTwiceFollowUpOnce(t *testing.T) {
	t.Parallel()
	b, _ := setupWrapped(t, Config{}, func(s *storage.Store) Store { return storagetest.NewTwice(s) })
	ep := newEndpoint(t, nil)
	id := b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("x"), Callback: &CallbackSpec{URL: ep.url("/cb"), Method: "POST"}})
	ep.waitRequests(t, "/cb", 1)
	b.recorded.Wait(t, waitTimeout, 2, func(r recorded) bool { return r.state == StateDelivered }) // the message and its callback
	require.False(t, b.pending(t, id))
	require.Zero(t, carriedBytes(b.engine), "carried bytes still accounted")
	require.Len(t, ep.requests("/cb"), 1)
}

// Bug 2a: an outcome that could not be recorded was only logged; the message sat in the
// due index until a restart. It is recorded on a later try.
func TestLatentRecordFailureIsRetried(t *testing.T) {
	t.Parallel()
	b, faults := setupWrapped(t, Config{}, faulty)
	ep := newEndpoint(t, nil)
	faults.FailUpdates(storagetest.Nth(2)) // 1: the publish, 2: the outcome
	id := b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("x")})
	b.waitRecorded(t, id, StateDelivered)
	require.LessOrEqual(t, len(ep.requests("/m")), 2)
	logs, _, err := b.engine.Logs(t.Context(), testProject, "", 10, func(ev *LogEvent) bool { return ev.MessageID == id && ev.State == StateDelivered })
	require.NoError(t, err)
	require.Len(t, logs, 1)
}

// Bug 2b: a storage error when the attempt read its message was taken for "cancelled".
func TestLatentReadErrorIsNotCancel(t *testing.T) {
	t.Parallel()
	b, faults := setupWrapped(t, Config{}, faulty)
	ep := newEndpoint(t, nil)
	faults.FailViews(storagetest.Nth(1))
	b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("x")})
	ep.waitRequests(t, "/m", 1)
}

// Bug 2c: a storage error while loading a queue's settings was taken for "queue deleted",
// and the message went out without the queue's limit.
func TestLatentQueueReadErrorKeepsLimit(t *testing.T) {
	t.Parallel()
	b, faults := setupWrapped(t, Config{}, faulty)
	release := make(chan struct{})
	var mu sync.Mutex
	open, most := 0, 0
	ep := newEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		mu.Lock()
		open++
		most = max(most, open)
		mu.Unlock()
		<-release
		mu.Lock()
		open--
		mu.Unlock()
		return 200, nil, "ok"
	})
	t.Cleanup(func() { closeOnce(release) })
	require.NoError(t, b.engine.UpsertQueue(t.Context(), testProject, "q", 1, false))
	faults.FailViews(func(n int) bool { return n <= 3 })
	a := b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("a"), Queue: "q"})
	c := b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("b"), Queue: "q"})
	ep.waitRequests(t, "/m", 1)
	deliverytest.Eventually(t, waitTimeout, "both messages under the queue's limit", func() bool {
		qs, err := b.engine.Queues(t.Context(), testProject, "q")
		return err == nil && qs[0].Lag == 2 && len(ep.requests("/m")) == 1
	})
	closeOnce(release)
	b.waitRecorded(t, a, StateDelivered)
	b.waitRecorded(t, c, StateDelivered)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, most, "queue parallelism 1 exceeded")
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// Bug 3: notify made ids for the waiters it counted plus 8 before its transaction;
// waiters registered in between beyond those 8 were silently not notified.
func TestLatentNotifyReachesLateWaiters(t *testing.T) {
	t.Parallel()
	b, faults := setupWrapped(t, Config{}, faulty)
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	const runs = 14
	for i := range runs {
		b.trigger(t, url, fmt.Sprintf("wfr_%d", i), `{}`, nil)
	}
	ep.waitRequests(t, "/wf", runs)
	wait := func(runID string) {
		resume := &Message{Project: testProject, URL: url, Method: "POST", RunID: runID, Header: map[string][]string{"Upstash-Workflow-Sdk-Version": {"1"}}}
		require.NoError(t, b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: "evt", RunID: runID, Timeout: time.Hour, TimeoutText: "1h",
			Step: []byte(`{"stepId":1,"stepName":"w","stepType":"Wait","concurrent":1}`), Resume: resume, OnTimeout: resume}))
	}
	wait("wfr_0")
	faults.BeforeNextUpdate(func() { // between notify's read and its write
		for i := 1; i < runs; i++ {
			wait(fmt.Sprintf("wfr_%d", i))
		}
	})
	res, _, err := b.engine.Notify(t.Context(), testProject, "evt", "", []byte(`{}`))
	require.NoError(t, err)
	ws, err := b.engine.Waiters(t.Context(), testProject, "evt")
	require.NoError(t, err)
	require.Empty(t, ws, "waiters left behind")
	require.Len(t, res, runs)
}

// Bug 4: a rate start that could not be made durable was logged and the request still
// left, so a crash right after could turn into a burst.
func TestLatentRateStartDurableBeforeSend(t *testing.T) {
	t.Parallel()
	var b *testBundle
	var mu sync.Mutex
	var durable []bool
	ep := newEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		var starts map[string][]int64
		require.NoError(t, b.store.View(func(tx *storage.Tx) error {
			var err error
			starts, err = tx.RateStarts(testProject)
			return err
		}))
		mu.Lock()
		durable = append(durable, len(starts["k"]) > 0)
		mu.Unlock()
		return 200, nil, "ok"
	})
	b, faults := setupWrapped(t, Config{}, faulty)
	faults.FailUpdates(storagetest.Nth(2)) // 1: the publish, 2: the rate start
	id := b.publish(t, &Message{URL: ep.url("/m"), Body: []byte("x"), FlowControl: &flowctl.Config{Key: "k", Rate: 10, Period: time.Second}})
	b.waitRecorded(t, id, StateDelivered)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, durable)
	for i, ok := range durable {
		require.True(t, ok, "request %d left before its rate start was durable", i)
	}
}

func faulty(s *storage.Store) *storagetest.Faults { return storagetest.NewFaults(s) }
