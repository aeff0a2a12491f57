package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/delivery/schedule"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/tick?x=1")

	r := env.call(t, http.MethodPost, "/v2/schedules/"+dest, []byte("payload"),
		"Upstash-Cron", "CRON_TZ=Europe/Berlin */5 * * * *", "Upstash-Schedule-Id", "nightly",
		"Upstash-Retries", "2", "Upstash-Delay", "10s", "Upstash-Forward-X-A", "a",
		"Upstash-Queue-Name", "q1", "Upstash-Label", "l1", "Upstash-Callback", env.Endpoint.URL("/cb"),
		"Upstash-Flow-Control-Key", "fk", "Upstash-Flow-Control-Value", "parallelism=2, rate=5, period=10s",
		"Content-Type", "text/plain")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.JSONEq(t, `{"scheduleId":"nightly"}`, string(r.Body))

	r = env.call(t, http.MethodGet, "/v2/schedules/nightly", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	v := decodeJSON[scheduleView](t, r)
	require.Equal(t, "nightly", v.ScheduleID)
	require.Equal(t, "CRON_TZ=Europe/Berlin */5 * * * *", v.Cron)
	require.Equal(t, dest, v.Destination)
	require.Equal(t, "POST", v.Method)
	require.Equal(t, "payload", v.Body)
	require.Equal(t, 2, v.Retries)
	require.Equal(t, int64(10), v.Delay)
	require.Equal(t, []string{"a"}, v.Header["X-A"])
	require.Equal(t, "q1", v.QueueName)
	require.Equal(t, []string{"l1"}, v.Labels)
	require.Equal(t, env.Endpoint.URL("/cb"), v.Callback)
	require.Equal(t, "fk", v.FlowControlKey)
	require.Equal(t, 2, v.Parallelism)
	require.Equal(t, 5, v.Rate)
	require.Equal(t, int64(10), v.Period)
	require.False(t, v.IsPaused)
	next := time.UnixMilli(v.NextScheduleTime)
	require.True(t, next.After(time.Now()) && next.Before(time.Now().Add(5*time.Minute+time.Second)), "next tick %s", next)
	require.Zero(t, next.Minute()%5)
	require.Zero(t, next.Second())

	r = env.call(t, http.MethodPost, "/v2/schedules/"+env.Endpoint.URL("/other"), nil, "Upstash-Cron", "@hourly")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	generated := decodeJSON[map[string]string](t, r)["scheduleId"]
	require.True(t, strings.HasPrefix(generated, "scd_"), generated)

	r = env.call(t, http.MethodGet, "/v2/schedules", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Len(t, decodeJSON[[]scheduleView](t, r), 2)

	r = env.call(t, http.MethodPatch, "/v2/schedules/nightly/pause", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	v = decodeJSON[scheduleView](t, env.call(t, http.MethodGet, "/v2/schedules/nightly", nil))
	require.True(t, v.IsPaused)
	require.Zero(t, v.NextScheduleTime)
	r = env.call(t, http.MethodPatch, "/v2/schedules/nightly/resume", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	v = decodeJSON[scheduleView](t, env.call(t, http.MethodGet, "/v2/schedules/nightly", nil))
	require.False(t, v.IsPaused)
	require.NotZero(t, v.NextScheduleTime)

	other := env.withProject(t, "other", "other-token")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v2/schedules/nightly"}, {http.MethodDelete, "/v2/schedules/nightly"},
		{http.MethodPatch, "/v2/schedules/nightly/pause"}, {http.MethodPatch, "/v2/schedules/nightly/resume"},
	} {
		r = other.call(t, c.method, c.path, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "another project's schedule: %s %s", c.method, c.path)
	}
	require.Empty(t, decodeJSON[[]scheduleView](t, other.call(t, http.MethodGet, "/v2/schedules", nil)))

	r = env.call(t, http.MethodDelete, "/v2/schedules/nightly", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodGet, "/v2/schedules/nightly", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, `schedule "nightly" not found`, r.errorMessage(t))
	r = env.call(t, http.MethodDelete, "/v2/schedules/nightly", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
}

func TestSchedulesAPIRejectsBadInput(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/tick")
	for _, c := range []struct {
		name, dest string
		header     []string
		status     int
		want       string
	}{
		{"NoCron", dest, nil, 400, "Upstash-Cron: a cron expression is required"},
		{"BadCron", dest, []string{"Upstash-Cron", "every day"}, 400, "Upstash-Cron: invalid cron expression"},
		{"SecondsField", dest, []string{"Upstash-Cron", "0 * * * * *"}, 400, "Upstash-Cron: invalid cron expression"},
		{"TooOften", dest, []string{"Upstash-Cron", "@every 10s"}, 400, "@every must be at least 1m0s"},
		{"NeverFeb30", dest, []string{"Upstash-Cron", "0 0 30 2 *"}, 400, "never occurs"},
		{"NeverApr31", dest, []string{"Upstash-Cron", "0 0 31 4 *"}, 400, "never occurs"},
		{"UnknownZone", dest, []string{"Upstash-Cron", "CRON_TZ=Mars/Olympus * * * * *"}, 400, "Upstash-Cron: invalid cron expression"},
		{"LongCron", dest, []string{"Upstash-Cron", "* * * * * " + strings.Repeat("x", 300)}, 400, "longer than 256 bytes"},
		{"NotBefore", dest, []string{"Upstash-Cron", "* * * * *", "Upstash-Not-Before", "1"}, 400, "Upstash-Not-Before: not allowed on a schedule"},
		{"BadID", dest, []string{"Upstash-Cron", "* * * * *", "Upstash-Schedule-Id", "a b"}, 400, "Upstash-Schedule-Id: invalid schedule id"},
		{"BadDestination", "ftp://x", []string{"Upstash-Cron", "* * * * *"}, 400, "destination:"},
		{"BadQueue", dest, []string{"Upstash-Cron", "* * * * *", "Upstash-Queue-Name", "a b"}, 400, "Upstash-Queue-Name"},
		{"TooManyRetries", dest, []string{"Upstash-Cron", "* * * * *", "Upstash-Retries", "1000"}, 412, "exceeds the maximum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := env.call(t, http.MethodPost, "/v2/schedules/"+c.dest, nil, c.header...)
			require.Equal(t, c.status, r.Status, "%s", r.Body)
			require.Contains(t, r.errorMessage(t), c.want)
		})
	}
	r := env.call(t, http.MethodPost, "/v2/schedules/"+dest, make([]byte, 2<<20), "Upstash-Cron", "* * * * *")
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
	require.Empty(t, decodeJSON[[]scheduleView](t, env.call(t, http.MethodGet, "/v2/schedules", nil)), "nothing was stored")
}

// inProcess records deliveries without sockets (a synctest bubble cannot wait on them).
type inProcess struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (p *inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, r)
	p.mu.Unlock()
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Header: http.Header{}, Request: r}, nil
}

// TestScheduleTickDelivery runs the API in a synctest bubble (handler called in process)
// and checks what a tick delivers: the template, signed, with Upstash-Schedule-Id, and
// its message, log and callback naming the schedule.
func TestScheduleTickDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
		require.NoError(t, err)
		defer store.Close()
		_, err = delivery.EnsureProject(t.Context(), store, delivery.Project{ID: testProject, CurrentSigningKey: testCurrentKey, NextSigningKey: testNextKey}, TokenHash(testToken))
		require.NoError(t, err)
		ep := &inProcess{}
		quiet := slog.New(slog.DiscardHandler)
		engine, err := delivery.New(delivery.Config{Transport: ep, Logger: quiet}, store)
		require.NoError(t, err)
		sched := schedule.New(schedule.Config{Logger: quiet}, store, engine)
		srv, err := New(Config{CheckDestination: netguard.Policy{}.CheckURL, Schedules: sched, Logger: quiet}, engine)
		require.NoError(t, err)
		require.NoError(t, engine.Start(context.Background()))
		defer engine.Stop()
		require.NoError(t, sched.Start(context.Background()))
		defer sched.Stop()

		do := func(method, path string, body string, header ...string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			for i := 0; i < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, req)
			return w
		}
		w := do(http.MethodPost, "/v2/schedules/https://hooks.example.com/tick", "hello",
			"Upstash-Cron", "* * * * *", "Upstash-Schedule-Id", "s1", "Upstash-Forward-X-A", "a",
			"Upstash-Callback", "https://hooks.example.com/cb", "Upstash-Method", "PUT")
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())

		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		ep.mu.Lock()
		reqs := ep.reqs
		ep.mu.Unlock()
		require.Len(t, reqs, 2, "the tick and its callback")
		tick, cb := reqs[0], reqs[1]
		if tick.URL.Path != "/tick" {
			tick, cb = cb, tick
		}
		require.Equal(t, http.MethodPut, tick.Method)
		require.Equal(t, "s1", tick.Header.Get(wire.HeaderScheduleID))
		require.Equal(t, "a", tick.Header.Get("X-A"))
		body, err := io.ReadAll(tick.Body)
		require.NoError(t, err)
		require.Equal(t, "hello", string(body))
		receiver := wire.Verifier{CurrentKey: testCurrentKey, NextKey: testNextKey}
		require.NoError(t, receiver.Verify(tick.Header.Get(wire.HeaderSignature), body, "https://hooks.example.com/tick", time.Now()), "the tick is signed")
		cbBody, err := io.ReadAll(cb.Body)
		require.NoError(t, err)
		require.Contains(t, string(cbBody), `"scheduleId":"s1"`)

		w = do(http.MethodGet, "/v2/logs?scheduleId=s1&state=DELIVERED", "")
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Body.String(), `"scheduleId":"s1"`)
		require.Contains(t, w.Body.String(), tick.Header.Get(wire.HeaderMessageID))
		w = do(http.MethodGet, "/v2/logs?scheduleId=nope", "")
		require.JSONEq(t, `{"events":[]}`, w.Body.String())
	})
}
