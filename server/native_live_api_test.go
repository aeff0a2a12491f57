package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/live"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Name string
	Data     json.RawMessage
}

// sseStream reads a live stream over real HTTP; its events arrive on Events, which is
// closed when the server ends the stream.
type sseStream struct {
	Events <-chan sseEvent
	cancel context.CancelFunc
}

func (e *apiEnv) openStream(t *testing.T, path, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req := e.request(t, http.MethodGet, path, nil).WithContext(ctx)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{}).Do(req) // no client timeout: the stream is long
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = json.RawMessage(line[6:])
			}
		}
	}()
	return &sseStream{Events: ch, cancel: cancel}
}

// next returns the next event whose name is one of names, skipping others.
func (s *sseStream) next(t *testing.T, names ...string) sseEvent {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-s.Events:
			require.True(t, ok, "the stream ended before a %v event", names)
			for _, n := range names {
				if ev.Name == n {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("no %v event within %s", names, waitTimeout)
		}
	}
}

func liveEnv(t *testing.T, cfg live.Config) (*apiEnv, *live.Hub) {
	hub := live.New(cfg)
	env := newAPI(t, envOptions{
		engine: func(c *delivery.Config) { c.Runs = hub },
		config: func(c *Config) { c.Live = hub },
	})
	return env, hub
}

// A client of GET /runs/{id}/events on real HTTP sees each step of a 3-step run as it is
// recorded, in order, then the final status and `end`; a reconnect with Last-Event-ID
// gets only the steps after it; GET /runs/stream shows the run's status changes.
func TestLiveRunStreamFollowsARun(t *testing.T) {
	t.Parallel()
	env, _ := liveEnv(t, live.Config{})
	app := newSDKApp(t, env)
	gates := map[string]chan struct{}{"one": make(chan struct{}), "two": make(chan struct{}), "three": make(chan struct{})}
	opened := map[string]*sync.Once{"one": {}, "two": {}, "three": {}}
	open := func(name string) { opened[name].Do(func() { close(gates[name]) }) }
	t.Cleanup(func() { open("one"); open("two"); open("three") }) // a failed check must not leave the endpoint blocked
	url := app.mount("/three", func(c *sdk.Context) (any, error) {
		for _, name := range []string{"one", "two", "three"} {
			if _, err := sdk.Run(c, name, func() (string, error) { <-gates[name]; return name + "!", nil }); err != nil {
				return nil, err
			}
		}
		return "done", nil
	})
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "three", "url": %q, "triggers": [{"event": "go"}]}]}`, url))
	project := env.openStream(t, "/runs/stream?workflow=three", "")

	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID
	a := env.openStream(t, "/runs/"+runID+"/events", "")
	first := a.next(t, "status", "step")
	require.Equal(t, "status", first.Name, "a run without steps yet starts with its status")

	open("one")
	step := a.next(t, "step")
	var s1 runStep
	require.NoError(t, json.Unmarshal(step.Data, &s1))
	require.Equal(t, "one", s1.Name, "the first step arrives while the run goes on")
	a.cancel() // the client drops

	open("two")
	env.eventually2Steps(t, runID)
	b := env.openStream(t, "/runs/"+runID+"/events", step.ID)
	resumed := b.next(t, "step")
	var s2 runStep
	require.NoError(t, json.Unmarshal(resumed.Data, &s2))
	require.Equal(t, "two", s2.Name, "the reconnect resumes after the last step it saw (%s)", step.ID)

	open("three")
	var s3 runStep
	require.NoError(t, json.Unmarshal(b.next(t, "step").Data, &s3))
	require.Equal(t, "three", s3.Name)
	end := b.next(t, "end")
	var st struct{ RunID, Status string }
	require.NoError(t, json.Unmarshal(end.Data, &st))
	require.Equal(t, runID, st.RunID)
	require.Equal(t, "succeeded", st.Status)
	for ev := range b.Events {
		t.Fatalf("an event after end: %+v", ev)
	}

	// A new client of an ended run gets its whole story at once.
	c := env.openStream(t, "/runs/"+runID+"/events", "")
	var names []string
	for ev := range c.Events {
		if ev.Name == "step" {
			var s runStep
			require.NoError(t, json.Unmarshal(ev.Data, &s))
			names = append(names, s.Name)
		} else {
			names = append(names, ev.Name)
		}
	}
	require.Equal(t, []string{"one", "two", "three", "status", "end"}, names)

	// The project stream saw the run end.
	for {
		ev := project.next(t, "run")
		var v struct{ RunID, Workflow, Status string }
		require.NoError(t, json.Unmarshal(ev.Data, &v))
		require.Equal(t, runID, v.RunID)
		require.Equal(t, "three", v.Workflow)
		if v.Status == "succeeded" {
			break
		}
	}
}

func (e *apiEnv) eventually2Steps(t *testing.T, id string) {
	eventually(t, "two steps recorded", func() bool { return len(e.nativeRun(t, id).Steps) >= 2 })
}

// The live routes are behind the project's token, refuse a stream beyond the limit with
// 503, and answer 404 for an unknown run or workflow, all as JSON errors.
func TestLiveStreamLimitsAndErrors(t *testing.T) {
	t.Parallel()
	env, _ := liveEnv(t, live.Config{MaxStreams: 1})
	r := env.call(t, http.MethodGet, "/runs/wfr_nope/events", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodGet, "/runs/stream?workflow=nope", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodGet, "/runs/stream?since=1", nil)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "since")

	req := env.request(t, http.MethodGet, "/runs/stream", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	r = env.send(t, req)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	_ = env.openStream(t, "/runs/stream", "")
	r = env.call(t, http.MethodGet, "/runs/stream", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "too many live streams")
}
