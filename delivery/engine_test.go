package delivery

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testProject = "p"
	testKey     = "sig_current_test_key"
	testNextKey = "sig_next_test_key"
)

// endpoint is the test kit's recording endpoint with this suite's shorthands.
type endpoint struct{ *deliverytest.Endpoint }

func newEndpoint(t *testing.T, respond deliverytest.Respond) *endpoint {
	return &endpoint{deliverytest.NewEndpoint(t, respond)}
}

func (ep *endpoint) url(path string) string { return ep.URL(path) }

func (ep *endpoint) requests(path string) []deliverytest.Request {
	return ep.Requests.Matching(deliverytest.OnPath(path))
}

// waitRequests waits until path got n requests.
func (ep *endpoint) waitRequests(t *testing.T, path string, n int) []deliverytest.Request {
	t.Helper()
	return ep.Requests.Wait(t, waitTimeout, n, deliverytest.OnPath(path))
}

// waitTimeout bounds every wait for an asynchronous effect.
const waitTimeout = 10 * time.Second

// recorded is an outcome or cancellation the engine made durable (Hooks.Recorded).
type recorded struct{ project, messageID, state string }

type testBundle struct {
	store    *storage.Store
	engine   *Engine
	path     string
	recorded *deliverytest.Signal[recorded] // outcomes made durable, in order
}

// waitRecorded waits until message id's outcome has been recorded in state (any state
// when state is ""), and returns the events of that message so far.
func (b *testBundle) waitRecorded(t *testing.T, id, state string) []recorded {
	t.Helper()
	b.recorded.Wait(t, waitTimeout, 1, func(r recorded) bool { return r.messageID == id && (state == "" || r.state == state) })
	return b.recorded.Matching(func(r recorded) bool { return r.messageID == id })
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "duraton.db")
	store, err := storage.Open(path, storage.Options{})
	require.NoError(t, err)
	_, err = EnsureProject(t.Context(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "tokenhash")
	require.NoError(t, err)
	b := &testBundle{store: store, path: path, recorded: &deliverytest.Signal[recorded]{}}
	cfg.Hooks.Recorded = b.signal
	b.engine = startEngine(t, store, cfg)
	t.Cleanup(func() { b.engine.Stop(); store.Close() })
	return b
}

// startEngine starts an engine over store for a test. Every write of the engine runs
// twice (storagetest.Twice) unless store is already a test wrapper: the rule that a
// transaction function may run twice is exercised by the whole suite.
func startEngine(t *testing.T, store Store, cfg Config) *Engine {
	t.Helper()
	if cfg.Destinations.Allow == nil && cfg.Transport == nil {
		cfg.Destinations = netguard.Policy{Allow: netguard.LoopbackPrefixes()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s, ok := store.(*storage.Store); ok {
		store = storagetest.NewTwice(s)
	}
	e, err := New(cfg, store)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	return e
}

func (b *testBundle) signal(project, messageID, state string) {
	b.recorded.Emit(recorded{project, messageID, state})
}

func (b *testBundle) publish(t *testing.T, m *Message) string {
	t.Helper()
	if m.Project == "" {
		m.Project = testProject
	}
	if m.Method == "" {
		m.Method = "POST"
	}
	res, err := b.engine.Publish(t.Context(), []*Message{m})
	require.NoError(t, err)
	return res[0].MessageID
}

func TestDeliverySignsAndForwards(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, nil)
	id := b.publish(t, &Message{URL: ep.url("/hook?x=1"), Body: []byte(`{"a":1}`), Retries: 3,
		Header: map[string][]string{"X-Custom": {"v"}, "Content-Type": {"application/json"}}})

	got := ep.waitRequests(t, "/hook", 1)[0]
	require.Equal(t, `{"a":1}`, string(got.Body))
	require.Equal(t, "v", got.Header.Get("X-Custom"))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	require.Equal(t, id, got.Header.Get(wire.HeaderMessageID))
	require.Equal(t, "0", got.Header.Get(wire.HeaderRetried))
	v := wire.Verifier{CurrentKey: testKey, NextKey: testNextKey}
	require.NoError(t, v.Verify(got.Header.Get(wire.HeaderSignature), got.Body, ep.url("/hook?x=1"), time.Now()))

	b.waitRecorded(t, id, StateDelivered)
	_, err := b.engine.Message(t.Context(), testProject, id)
	require.ErrorIs(t, err, ErrNotFound, "a delivered message leaves the pending set")
	events, _, err := b.engine.Logs(t.Context(), testProject, "", 10, func(ev *LogEvent) bool { return ev.MessageID == id })
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, []string{StateDelivered, StateCreated}, []string{events[0].State, events[1].State})
}

func TestRetriesThenDeadLetterAndFailureCallback(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if r.URL.Path == "/fail" {
			return http.StatusInternalServerError, nil, "broken"
		}
		return http.StatusOK, nil, "ok"
	})
	id := b.publish(t, &Message{URL: ep.url("/fail"), Body: []byte("payload"), Retries: 2, RetryDelay: "10",
		FailureCallback: &CallbackSpec{URL: ep.url("/failed"), Method: "POST", Retries: 0, Header: map[string][]string{"X-F": {"1"}}}})

	attempts := ep.waitRequests(t, "/fail", 3)
	for i, a := range attempts[:3] {
		require.Equal(t, strconv.Itoa(i), a.Header.Get(wire.HeaderRetried))
	}
	fc := ep.waitRequests(t, "/failed", 1)[0]
	require.Equal(t, "1", fc.Header.Get("X-F"))
	var body wire.CallbackPayload
	require.NoError(t, json.Unmarshal(fc.Body, &body))
	require.Equal(t, 500, body.Status)
	require.Equal(t, 2, body.Retried)
	require.Equal(t, 2, body.MaxRetries)
	require.Equal(t, id, body.SourceMessageID)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte("broken")), body.Body)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte("payload")), body.SourceBody)
	require.NotEmpty(t, body.DLQID)

	entries, _, err := b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, body.DLQID, entries[0].DLQID)
	require.Equal(t, id, entries[0].Message.ID)
	require.Equal(t, 500, entries[0].Response.Status)
	require.Len(t, ep.requests("/fail"), 3, "no attempt after the retries are used up")

	// Retrying the dead letter publishes it again with a fresh budget.
	ids, err := b.engine.RetryDLQ(t.Context(), testProject, []string{entries[0].DLQID})
	require.NoError(t, err)
	require.Len(t, ids, 1)
	ep.waitRequests(t, "/fail", 4)
	b.waitRecorded(t, ids[0], StateFailed)
	entries, _, err = b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, ids[0], entries[0].Message.ID)
}

func TestNonRetryableGoesStraightToDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return 489, http.Header{"Upstash-Nonretryable-Error": {"true"}}, `{"error":"no"}`
	})
	id := b.publish(t, &Message{URL: ep.url("/x"), Retries: 5})
	b.waitRecorded(t, id, StateFailed)
	entries, _, err := b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Len(t, ep.requests("/x"), 1)
}

func TestCallbackAfterEveryAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if r.URL.Path == "/flaky" && n == 0 {
			return http.StatusServiceUnavailable, http.Header{"Get-Header": {"a"}}, "later"
		}
		return http.StatusCreated, http.Header{"Get-Header": {"b"}}, "done"
	})
	id := b.publish(t, &Message{URL: ep.url("/flaky"), Retries: 1, RetryDelay: "0",
		Callback: &CallbackSpec{URL: ep.url("/cb"), Method: "POST", Retries: 3}})
	cbs := ep.waitRequests(t, "/cb", 2)
	var first, second wire.CallbackPayload
	require.NoError(t, json.Unmarshal(cbs[0].Body, &first))
	require.NoError(t, json.Unmarshal(cbs[1].Body, &second))
	if first.Retried > second.Retried {
		first, second = second, first
	}
	require.Equal(t, 503, first.Status)
	require.Equal(t, 0, first.Retried)
	require.Equal(t, 201, second.Status)
	require.Equal(t, 1, second.Retried)
	require.Equal(t, 1, second.MaxRetries, "the last attempt has retried == maxRetries")
	require.Equal(t, []string{"b"}, second.Header["Get-Header"], "canonical header names, array values")
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte("done")), second.Body)
	require.Equal(t, id, second.SourceMessageID)
	v := wire.Verifier{CurrentKey: testKey, NextKey: testNextKey}
	require.NoError(t, v.Verify(cbs[1].Header.Get(wire.HeaderSignature), cbs[1].Body, ep.url("/cb"), time.Now()))
}

func TestQueueParallelismAndPause(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var inFlight, maxInFlight atomic.Int32
	release := make(chan struct{})
	ep := newEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		inFlight.Add(-1)
		return http.StatusOK, nil, ""
	})
	require.NoError(t, b.engine.UpsertQueue(t.Context(), testProject, "jobs", 2, true))
	for i := 0; i < 6; i++ {
		b.publish(t, &Message{URL: ep.url("/q"), Queue: "jobs", Body: []byte(strconv.Itoa(i))})
	}
	qs, err := b.engine.Queues(t.Context(), testProject, "jobs")
	require.NoError(t, err)
	deliverytest.Eventually(t, waitTimeout, "a paused queue holds its messages", func() bool {
		qs, _ = b.engine.Queues(t.Context(), testProject, "jobs")
		return qs[0].Lag == 6
	})
	require.Empty(t, ep.requests("/q"))

	require.NoError(t, b.engine.SetQueuePaused(t.Context(), testProject, "jobs", false))
	ep.waitRequests(t, "/q", 2)
	close(release)
	got := ep.waitRequests(t, "/q", 6)
	require.LessOrEqual(t, maxInFlight.Load(), int32(2))
	var order []string
	for _, r := range got {
		order = append(order, string(r.Body))
	}
	require.ElementsMatch(t, []string{"0", "1", "2", "3", "4", "5"}, order)
}

func TestEnqueueCreatesQueueAndWaitsForRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if string(r.Header.Get("X-Name")) == "first" && n == 0 {
			return http.StatusInternalServerError, nil, ""
		}
		return http.StatusOK, nil, ""
	})
	b.publish(t, &Message{URL: ep.url("/q"), Queue: "fresh", Retries: 1, RetryDelay: "50", Header: map[string][]string{"X-Name": {"first"}}})
	b.publish(t, &Message{URL: ep.url("/q"), Queue: "fresh", Header: map[string][]string{"X-Name": {"second"}}})
	got := ep.waitRequests(t, "/q", 3)
	var order []string
	for _, r := range got {
		order = append(order, r.Header.Get("X-Name")+"/"+r.Header.Get(wire.HeaderRetried))
	}
	require.Equal(t, []string{"first/0", "first/1", "second/0"}, order, "the next message waits for the retries of the current one")
	qs, err := b.engine.Queues(t.Context(), testProject, "fresh")
	require.NoError(t, err)
	require.Equal(t, DefaultQueueParallelism, qs[0].Parallelism)

	_, err = b.engine.Queues(t.Context(), testProject, "never-made")
	require.ErrorIs(t, err, ErrNotFound)
}

func TestCancelFreesQueueSlot(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if r.Header.Get("X-Name") == "stuck" {
			return http.StatusInternalServerError, nil, ""
		}
		return http.StatusOK, nil, ""
	})
	stuck := b.publish(t, &Message{URL: ep.url("/q"), Queue: "one", Retries: 5, RetryDelay: "3600000", Header: map[string][]string{"X-Name": {"stuck"}}})
	ep.waitRequests(t, "/q", 1)
	b.publish(t, &Message{URL: ep.url("/q"), Queue: "one", Header: map[string][]string{"X-Name": {"next"}}})
	deliverytest.Eventually(t, waitTimeout, "the retrying message holds the only slot", func() bool {
		qs, err := b.engine.Queues(t.Context(), testProject, "one")
		return err == nil && qs[0].Lag == 2
	})
	n, err := b.engine.Cancel(t.Context(), testProject, []string{stuck}, nil, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got := ep.waitRequests(t, "/q", 2)
	require.Equal(t, "next", got[1].Header.Get("X-Name"))
}

func TestDeduplication(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, nil)
	res, err := b.engine.Publish(t.Context(), []*Message{
		{Project: testProject, URL: ep.url("/d"), Method: "POST", DedupID: "id:same"},
		{Project: testProject, URL: ep.url("/d"), Method: "POST", DedupID: "id:same"},
	})
	require.NoError(t, err)
	require.False(t, res[0].Deduplicated)
	require.True(t, res[1].Deduplicated)
	require.Equal(t, res[0].MessageID, res[1].MessageID)
	ep.waitRequests(t, "/d", 1)
	b.publish(t, &Message{URL: ep.url("/sentinel")})
	ep.waitRequests(t, "/sentinel", 1)
	require.Len(t, ep.requests("/d"), 1)
}

func TestCancelRemovesPendingMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.publish(t, &Message{URL: "http://127.0.0.1:1/never", NotBefore: time.Now().Add(time.Hour).UnixMilli()})
	n, err := b.engine.Cancel(t.Context(), testProject, []string{id}, nil, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = b.engine.Message(t.Context(), testProject, id)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, b.store.View(func(tx *storage.Tx) error {
		return tx.ScanDue(nil, func(e storage.DueEntry) bool {
			require.NotEqual(t, id, e.MessageID, "a cancelled message leaves the due index")
			return true
		})
	}))
	n, err = b.engine.Cancel(t.Context(), testProject, []string{id}, nil, 1)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestBufferPagesInEverything(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{BufferSize: 8})
	ep := newEndpoint(t, nil)
	now := time.Now()
	var msgs []*Message
	for i := 0; i < 60; i++ {
		// Reverse due order so later publishes land below the watermark too.
		msgs = append(msgs, &Message{Project: testProject, URL: ep.url("/p"), Method: "POST", Body: []byte(strconv.Itoa(i)),
			NotBefore: now.Add(time.Duration(60-i) * time.Millisecond).UnixMilli()})
	}
	_, err := b.engine.Publish(t.Context(), msgs)
	require.NoError(t, err)
	got := ep.waitRequests(t, "/p", 60)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Body)] = true
	}
	require.Len(t, seen, 60)
}

func TestInFlightAttemptIsRedeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "duraton.db")
	store, err := storage.Open(path, storage.Options{})
	require.NoError(t, err)
	defer store.Close()
	_, err = EnsureProject(t.Context(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "h")
	require.NoError(t, err)

	hold := make(chan struct{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if n == 0 {
			select { // the first attempt hangs until the engine gives up on it
			case <-hold:
			case <-r.Context().Done():
			}
			return http.StatusOK, nil, ""
		}
		return http.StatusOK, nil, ""
	})
	defer close(hold)
	first := startEngine(t, store, Config{DrainTimeout: 50 * time.Millisecond})
	_, err = first.Publish(t.Context(), []*Message{{Project: testProject, URL: ep.url("/slow"), Method: "POST", Retries: 3}})
	require.NoError(t, err)
	ep.waitRequests(t, "/slow", 1)
	first.Stop() // drain times out, the attempt is cancelled and not recorded

	second := startEngine(t, store, Config{})
	defer second.Stop()
	got := ep.waitRequests(t, "/slow", 2)
	require.Equal(t, "0", got[1].Header.Get(wire.HeaderRetried), "redelivery after restart spends no retry")
}

func TestQueueCountIsLimited(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxQueues: 2})
	require.NoError(t, b.engine.UpsertQueue(t.Context(), testProject, "q1", 1, false))
	b.publish(t, &Message{URL: "http://127.0.0.1:1/x", Queue: "q2", NotBefore: time.Now().Add(time.Hour).UnixMilli()})
	require.ErrorIs(t, b.engine.UpsertQueue(t.Context(), testProject, "q3", 1, false), ErrQueueLimit)
	_, err := b.engine.Publish(t.Context(), []*Message{{Project: testProject, URL: "http://127.0.0.1:1/x", Method: "POST", Queue: "q4"}})
	require.ErrorIs(t, err, ErrQueueLimit, "enqueueing to a new queue over the limit is refused")
	require.NoError(t, b.engine.UpsertQueue(t.Context(), testProject, "q1", 3, false), "updating an existing queue is fine")
}
