package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

// concurrency {limit, key}: at most limit deliveries of the workflow per key value hold a
// slot at once; the others wait (in run order) and start as slots free. Another key
// value has its own slots.
func TestNativeConcurrency(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	open, most := map[string]int{}, map[string]int{}
	// The endpoint records the account of each delivery from the run's payload and holds
	// the request until released, so the deliveries in flight can be counted.
	hold := deliverytest.NewEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		var history []struct {
			Body []byte `json:"body"`
		}
		var payload struct {
			Data struct {
				Account string `json:"account"`
			} `json:"data"`
		}
		var raw []byte
		if err := json.NewDecoder(r.Body).Decode(&history); err == nil && len(history) > 0 {
			raw = history[0].Body
		}
		_ = json.Unmarshal(raw, &payload)
		acct := payload.Data.Account
		mu.Lock()
		open[acct]++
		most[acct] = max(most[acct], open[acct])
		mu.Unlock()
		<-release
		mu.Lock()
		open[acct]--
		mu.Unlock()
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	env := newAPI(t, envOptions{})
	t.Cleanup(func() { closeChan(release) }) // before the engine's Stop
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "sync", "url": %q, "triggers": [{"event": "e"}],
		"concurrency": {"limit": 2, "key": "account"}}]}`, hold.URL("/wf")))
	for i := range 5 {
		env.sendEvents(t, fmt.Sprintf(`{"name": "e", "data": {"account": "a", "n": %d}}`, i))
	}
	env.sendEvents(t, `{"name": "e", "data": {"account": "b"}}`)
	// Two of a's five and b's one arrive; the other three of a wait for a slot.
	hold.Requests.Wait(t, waitTimeout, 3, nil)
	eventually(t, "a's waiting deliveries in the key's waitlist", func() bool {
		for _, k := range env.Engine.FlowKeys(testProject, "wf.sync.") {
			if k.WaitListSize == 3 && k.ParallelismCount == 2 && k.ParallelismMax == 2 {
				return true
			}
		}
		return false
	})
	require.Len(t, hold.Requests.All(), 3, "no more than the limit start")
	closeChan(release)
	hold.Requests.Wait(t, waitTimeout, 6, nil)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, most["a"], "key a: at most 2 in flight")
	require.Equal(t, 1, most["b"])
}

// Two concurrency scopes are accepted and shown as given (their enforcement is tested on
// the engine in delivery/native, TestConcurrencyTwoScopes); the same key twice is refused.
func TestNativeConcurrencyTwoScopes(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	r := env.putApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "sync", "url": %q, "triggers": [{"event": "e"}],
		"concurrency": [{"limit": 2, "key": "account"}, {"limit": 10}]}]}`, env.Endpoint.URL("/wf")))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Contains(t, string(r.Body), `"concurrency":[{"limit":2,"key":"account"},{"limit":10}]`)
	r = env.putApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "sync", "url": %q, "triggers": [{"event": "e"}],
		"concurrency": [{"limit": 2, "key": "account"}, {"limit": 10, "key": "account"}]}]}`, env.Endpoint.URL("/wf")))
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), `concurrency[1].key`)
}

func closeChan(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// priority {shiftMs}: a workflow's deliveries wait as if its runs had been created shiftMs
// earlier, so at a full project ceiling they go ahead of older unshifted runs.
func TestNativePriority(t *testing.T) {
	t.Parallel()
	next := make(chan struct{}, 10)
	var mu sync.Mutex
	var order []string
	hold := deliverytest.NewEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		mu.Lock()
		order = append(order, r.Header.Get("Duraton-Workflow"))
		mu.Unlock()
		<-next
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.ProjectCeiling = 1 }})
	t.Cleanup(func() { // before the engine's Stop, which waits for the held request
		for range 10 {
			next <- struct{}{}
		}
	})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [
		{"name": "low", "url": %q, "triggers": [{"event": "low"}]},
		{"name": "high", "url": %q, "triggers": [{"event": "high"}], "priority": {"shiftMs": 60000}}]}`,
		hold.URL("/low"), hold.URL("/high")))
	env.sendEvents(t, `{"name": "low", "data": {"n": 1}}`)
	hold.Requests.Wait(t, waitTimeout, 1, nil) // low 1 holds the only slot
	env.sendEvents(t, `{"name": "low", "data": {"n": 2}}`)
	env.sendEvents(t, `{"name": "high", "data": {}}`)
	eventually(t, "both waiting at the ceiling", func() bool {
		reason, _, ok, err := env.Engine.RunWaitReason(t.Context(), testProject, env.lastRunOf(t, "high"))
		return err == nil && ok && reason != ""
	})
	next <- struct{}{}
	hold.Requests.Wait(t, waitTimeout, 2, nil)
	next <- struct{}{}
	hold.Requests.Wait(t, waitTimeout, 3, nil)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"low", "high", "low"}, order, "the shifted workflow goes ahead of the older run")
}

// lastRunOf is the id of the newest run of a native workflow.
func (e *apiEnv) lastRunOf(t *testing.T, workflow string) string {
	t.Helper()
	runs, _, err := e.Engine.Runs(t.Context(), testProject, nil, 100, func(r *delivery.Run) bool {
		return len(r.Header["Duraton-Workflow"]) > 0 && r.Header["Duraton-Workflow"][0] == workflow
	})
	require.NoError(t, err)
	require.NotEmpty(t, runs, "no run of %s", workflow)
	return runs[0].ID
}

// concurrencySteps records the steps a native workflow's runs execute, in order.
type concurrencySteps struct {
	mu    sync.Mutex
	steps []string
	added chan struct{}
}

func (s *concurrencySteps) add(step string) {
	s.mu.Lock()
	s.steps = append(s.steps, step)
	s.mu.Unlock()
	s.added <- struct{}{}
}

// threeSteps is a route whose run records steps a, b and c as "<event data n>:<step>".
func (s *concurrencySteps) threeSteps(c *sdk.Context) (any, error) {
	ev, _ := c.Event()
	var data struct{ N string }
	if err := ev.Decode(&data); err != nil {
		return nil, err
	}
	for _, step := range []string{"a", "b", "c"} {
		if _, err := sdk.Run(c, step, func() (bool, error) { s.add(data.N + ":" + step); return true, nil }); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (s *concurrencySteps) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.steps...)
}

// A sleeping run holds no concurrency slot: with limit 1, a second run's first step runs
// while the first run sleeps (for an hour: if the sleeper held the slot, the second run
// could not start within the test).
func TestNativeConcurrencySleepersHoldNoSlot(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	rec := &concurrencySteps{added: make(chan struct{}, 16)}
	url := app.mount("/sleepy", func(c *sdk.Context) (any, error) {
		ev, _ := c.Event()
		var data struct{ N string }
		if err := ev.Decode(&data); err != nil {
			return nil, err
		}
		if _, err := sdk.Run(c, "a", func() (bool, error) { rec.add(data.N + ":a"); return true, nil }); err != nil {
			return nil, err
		}
		if data.N == "r1" {
			if err := c.Sleep("nap", time.Hour); err != nil {
				return nil, err
			}
		}
		return sdk.Run(c, "b", func() (bool, error) { rec.add(data.N + ":b"); return true, nil })
	})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "sleepy", "url": %q, "triggers": [{"event": "e"}],
		"concurrency": {"limit": 1}}]}`, url))
	env.sendEvents(t, `{"name": "e", "data": {"n": "r1"}}`)
	waitSteps(t, rec, 1)
	env.sendEvents(t, `{"name": "e", "data": {"n": "r2"}}`)
	waitSteps(t, rec, 3)
	require.Equal(t, []string{"r1:a", "r2:a", "r2:b"}, rec.all(), "r2 runs while r1 sleeps")
}

// Inside one concurrency scope, older runs go first: a run's next step waits ahead of
// newer runs' first steps, so with limit 1 each run finishes before the next begins.
func TestNativeConcurrencyOldRunsFirst(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	rec := &concurrencySteps{added: make(chan struct{}, 16)}
	url := app.mount("/steps", rec.threeSteps)
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "steps", "url": %q, "triggers": [{"event": "e"}],
		"concurrency": {"limit": 1}}]}`, url))
	env.sendEvents(t, `[{"name": "e", "data": {"n": "r1"}}, {"name": "e", "data": {"n": "r2"}}, {"name": "e", "data": {"n": "r3"}}]`)
	waitSteps(t, rec, 9)
	require.Equal(t, []string{"r1:a", "r1:b", "r1:c", "r2:a", "r2:b", "r2:c", "r3:a", "r3:b", "r3:c"}, rec.all())
}

func waitSteps(t *testing.T, rec *concurrencySteps, n int) {
	t.Helper()
	for len(rec.all()) < n {
		select {
		case <-rec.added:
		case <-time.After(waitTimeout):
			t.Fatalf("waited for %d steps, have %v", n, rec.all())
		}
	}
}

// Throttle gates run starts only: a started run's later steps are not paced, while the
// next run's start waits for the throttle (1 per minute here, so it cannot start within
// the test).
func TestNativeThrottleGatesStartsOnly(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	rec := &concurrencySteps{added: make(chan struct{}, 16)}
	url := app.mount("/paced", rec.threeSteps)
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "paced", "url": %q, "triggers": [{"event": "e"}],
		"throttle": {"limit": 1, "perMs": 60000}}]}`, url))
	res := env.sendEvents(t, `[{"name": "e", "data": {"n": "r1"}}, {"name": "e", "data": {"n": "r2"}}]`)
	waitSteps(t, rec, 3)
	run := env.nativeRun(t, res[1].Runs[0].RunID)
	require.Equal(t, "queued", run.Status)
	require.Contains(t, run.Waiting.Reason, "throttled")
	require.Equal(t, []string{"r1:a", "r1:b", "r1:c"}, rec.all(), "r1's steps ran unpaced; r2 waits for its start")
}
