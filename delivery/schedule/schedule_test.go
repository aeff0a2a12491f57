package schedule

import (
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const project = "p"

// endpoint is an in-process destination (real sockets would stop synctest's clock). It
// records when each request arrived and its headers.
type endpoint struct {
	mu   sync.Mutex
	reqs []received
}

type received struct {
	at     time.Time
	path   string
	header http.Header
	body   string
}

func (e *endpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.reqs = append(e.reqs, received{at: time.Now(), path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
	e.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

func (e *endpoint) got() []received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]received(nil), e.reqs...)
}

// server is an engine and a scheduler over one bbolt file, as `duraton serve` wires them.
type server struct {
	engine *delivery.Engine
	sched  *Scheduler
}

func openStore(t *testing.T, dir string) *storage.Store {
	store, err := storage.Open(filepath.Join(dir, "duraton.db"), storage.Options{})
	require.NoError(t, err)
	_, err = delivery.EnsureProject(t.Context(), store, delivery.Project{ID: project, CurrentSigningKey: "sig_a", NextSigningKey: "sig_b"}, "h")
	require.NoError(t, err)
	return store
}

func start(t *testing.T, store *storage.Store, ep *endpoint) *server {
	quiet := slog.New(slog.DiscardHandler)
	// Every write runs twice (rolled back once), as the group committer may do.
	twice := storagetest.NewTwice(store)
	e, err := delivery.New(delivery.Config{Transport: ep, Logger: quiet, SweepInterval: 24 * time.Hour}, twice)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	s := New(Config{Logger: quiet}, twice, e)
	require.NoError(t, s.Start(t.Context()))
	return &server{engine: e, sched: s}
}

// stop shuts down in serve's order: the scheduler (no new ticks), then the engine.
func (s *server) stop() {
	s.sched.Stop()
	s.engine.Stop()
}

func every(t *testing.T, s *server, cron string) string {
	id, err := s.sched.Create(t.Context(), Spec{Project: project, Cron: cron, Template: delivery.Message{URL: "http://x.test/tick", Method: "POST", Body: []byte("b"), Retries: 3}})
	require.NoError(t, err)
	return id
}

func TestEveryMinuteForTenMinutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := openStore(t, t.TempDir())
		defer store.Close()
		ep := &endpoint{}
		s := start(t, store, ep)
		defer s.stop()
		t0 := time.Now() // synctest starts at 2000-01-01 00:00:00 UTC
		id := every(t, s, "* * * * *")

		time.Sleep(10*time.Minute + 30*time.Second)
		synctest.Wait()
		got := ep.got()
		require.Len(t, got, 10)
		for i, r := range got {
			require.Equal(t, t0.Add(time.Duration(i+1)*time.Minute), r.at, "tick %d on the minute", i+1)
			require.Equal(t, id, r.header.Get(wire.HeaderScheduleID))
			require.Equal(t, "b", r.body)
		}
		sc, err := s.sched.Get(t.Context(), project, id)
		require.NoError(t, err)
		require.Equal(t, t0.Add(11*time.Minute).UnixMilli(), sc.NextAt)
		require.Equal(t, t0.Add(10*time.Minute).UnixMilli(), sc.LastAt)
	})
}

// TestRestartFiresMissedTicksOnce: a restart right after a tick fires nothing extra; a
// server down for three ticks fires once when it comes back, then on the minute again.
func TestRestartFiresMissedTicksOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		store := openStore(t, dir)
		ep := &endpoint{}
		s := start(t, store, ep)
		t0 := time.Now()
		every(t, s, "* * * * *")
		time.Sleep(90 * time.Second) // tick at 00:01
		synctest.Wait()
		require.Len(t, ep.got(), 1)

		// Restart at 00:01:30 on the same file: the 00:01 tick is not fired again.
		s.stop()
		require.NoError(t, store.Close())
		store = openStore(t, dir)
		s = start(t, store, ep)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Len(t, ep.got(), 1, "a restart does not repeat the tick that fired")

		// Down from 00:01:40 to 00:04:40: the ticks 00:02, 00:03, 00:04 fall.
		s.stop()
		require.NoError(t, store.Close())
		time.Sleep(3 * time.Minute)
		store = openStore(t, dir)
		defer store.Close()
		restarted := time.Now()
		s = start(t, store, ep)
		defer s.stop()
		synctest.Wait()
		got := ep.got()
		require.Len(t, got, 2, "the three missed ticks fire once")
		require.Equal(t, restarted, got[1].at, "late, at start-up")

		time.Sleep(time.Minute) // to 00:05:40: the 00:05 tick
		synctest.Wait()
		got = ep.got()
		require.Len(t, got, 3)
		require.Equal(t, t0.Add(5*time.Minute), got[2].at)
	})
}

// TestCronTZAcrossDST: America/New_York in 2000 (daylight saving from April 2 02:00 to
// October 29 02:00). A 09:00 schedule fires at 09:00 local on both sides of each change;
// 02:30 does not exist on April 2 and is skipped that day; 01:30 happens twice on
// October 29 and fires once.
func TestCronTZAcrossDST(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ny, err := time.LoadLocation("America/New_York")
		require.NoError(t, err)
		time.Sleep(time.Until(time.Date(2000, 3, 31, 0, 0, 0, 0, time.UTC)))

		store := openStore(t, t.TempDir())
		defer store.Close()
		ep := &endpoint{}
		s := start(t, store, ep)
		defer s.stop()
		create := func(cron, path string) {
			_, err := s.sched.Create(t.Context(), Spec{Project: project, Cron: cron, Template: delivery.Message{URL: "http://x.test" + path, Method: "POST"}})
			require.NoError(t, err)
		}
		create("CRON_TZ=America/New_York 0 9 * * *", "/nine")
		create("CRON_TZ=America/New_York 30 2 * * *", "/gap")
		time.Sleep(4 * 24 * time.Hour) // to April 4 00:00 UTC
		synctest.Wait()
		create("CRON_TZ=America/New_York 0 9 * * *", "/nine-fall")
		create("TZ=America/New_York 30 1 * * *", "/twice")
		time.Sleep(time.Until(time.Date(2000, 10, 31, 0, 0, 0, 0, time.UTC)))
		synctest.Wait()

		local := func(path string, from, to time.Time) []string {
			var out []string
			for _, r := range ep.got() {
				if r.path == path && !r.at.Before(from) && r.at.Before(to) {
					out = append(out, r.at.In(ny).Format("01-02 15:04 MST"))
				}
			}
			return out
		}
		spring := time.Date(2000, 3, 31, 0, 0, 0, 0, time.UTC)
		springEnd := time.Date(2000, 4, 4, 0, 0, 0, 0, time.UTC)
		require.Equal(t, []string{"03-31 09:00 EST", "04-01 09:00 EST", "04-02 09:00 EDT", "04-03 09:00 EDT"}, local("/nine", spring, springEnd))
		require.Equal(t, []string{"03-31 02:30 EST", "04-01 02:30 EST", "04-03 02:30 EDT"}, local("/gap", spring, springEnd))

		fall := time.Date(2000, 10, 27, 0, 0, 0, 0, time.UTC)
		fallEnd := time.Date(2000, 10, 31, 0, 0, 0, 0, time.UTC)
		require.Equal(t, []string{"10-27 09:00 EDT", "10-28 09:00 EDT", "10-29 09:00 EST", "10-30 09:00 EST"}, local("/nine-fall", fall, fallEnd))
		require.Equal(t, []string{"10-27 01:30 EDT", "10-28 01:30 EDT", "10-29 01:30 EDT", "10-30 01:30 EST"}, local("/twice", fall, fallEnd))
	})
}
