package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// benchWaitersResult is the JSON line of `duraton bench events --waiters N`.
type benchWaitersResult struct {
	Waiters      int     `json:"waiters"`
	If           string  `json:"if"`
	MatchWaiters int     `json:"match_waiters"`
	IfWaiters    int     `json:"if_waiters"`
	Events       int     `json:"wake_events"`
	SetupSec     float64 `json:"setup_sec"`
	P50Ms        float64 `json:"event_to_next_delivery_p50_ms"`
	P99Ms        float64 `json:"event_to_next_delivery_p99_ms"`
	MatchP50Ms   float64 `json:"match_p50_ms"`
	MatchP99Ms   float64 `json:"match_p99_ms"`
	IfP50Ms      float64 `json:"if_p50_ms"`
	IfP99Ms      float64 `json:"if_p99_ms"`
	WrongWakes   int64   `json:"wrong_wakes"`
}

// waitBenchTimeout bounds each phase of the waiter case.
const waitBenchTimeout = 3 * time.Minute

// benchWaiters is the correlated-wait case of `bench events`: waiters runs of one
// workflow wait for the same event name, half with a match on data.orderId and half
// with an `if` over both events' data, all at once. Then `events` events go one at a
// time, each for one waiting run (alternately a match and an if run), and the time
// from its POST /events to that run's next delivery is measured. A match waiter is
// found by the index; so is an `if` waiter whose condition is an && chain with the
// equality of a path of both events (the default, the example of docs/protocol.md); any other
// `if` is evaluated for every event.
func benchWaiters(ctx context.Context, waiters, events int, cond string, progress func(done, total int)) (benchWaitersResult, error) {
	if events > waiters {
		return benchWaitersResult{}, fmt.Errorf("--waiter-events (%d) must be at most --waiters (%d)", events, waiters)
	}
	srv, err := servertest.Start(servertest.Options{Engine: delivery.Config{MaxInFlight: 512}})
	if err != nil {
		return benchWaitersResult{}, err
	}
	defer srv.Close()
	var (
		mu     sync.Mutex
		woken  = map[string]chan time.Time{} // order id → its run's next delivery
		wrong  atomic.Int64
		waited atomic.Int64
	)
	for i := range events {
		woken[orderID(i)] = make(chan time.Time, 1)
	}
	route := func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(errors.New("not a native run"))
		}
		var start struct{ OrderID string }
		if err := ev.Decode(&start); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		w := sdk.Wait{Event: "bench.pay", Timeout: time.Hour, Match: "data.orderId"}
		if orderNum(start.OrderID)%2 == 1 {
			w = sdk.Wait{Event: "bench.pay", Timeout: time.Hour, If: cond}
		}
		res, err := sdk.WaitForEvent(c, "pay", w) // the first delivery ends here
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var paid struct{ OrderID string }
		if err := json.Unmarshal(res.Data, &paid); err != nil || paid.OrderID != start.OrderID {
			wrong.Add(1)
			return nil, nil
		}
		mu.Lock()
		ch := woken[start.OrderID]
		mu.Unlock()
		if ch != nil {
			select {
			case ch <- now:
			default:
			}
		}
		return nil, nil
	}
	// The wait is registered by the first delivery's POST /v2/wait, made before its
	// answer: a first delivery answered is a run waiting.
	serve := sdk.Serve(route, sdk.WithServeEnv(srv.Env()), sdk.WithoutInlineAnswers())
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve.ServeHTTP(w, r)
		waited.Add(1)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return benchWaitersResult{}, err
	}
	endpoint := &http.Server{Handler: handler}
	go endpoint.Serve(ln)
	defer endpoint.Close()
	client, err := sdk.NewClient(sdk.WithEnv(srv.Env()))
	if err != nil {
		return benchWaitersResult{}, err
	}
	app, err := sdk.NewApp("bench", "", []sdk.Workflow{{Name: "bench.wait", URL: "http://" + ln.Addr().String() + "/wait", Triggers: []string{"bench.start"}}})
	if err != nil {
		return benchWaitersResult{}, err
	}
	if _, err := client.RegisterApp(ctx, app); err != nil {
		return benchWaitersResult{}, err
	}

	start := time.Now()
	const batch = 1000 // a POST /events starts at most 1,000 runs
	for from := 0; from < waiters; from += batch {
		evs := make([]sdk.Event, 0, batch)
		for i := from; i < min(from+batch, waiters); i++ {
			evs = append(evs, sdk.Event{Name: "bench.start", Data: jsonRaw(`{"orderId":"` + orderID(i) + `"}`)})
		}
		if _, err := client.SendEvents(ctx, evs); err != nil {
			return benchWaitersResult{}, err
		}
	}
	deadline := time.Now().Add(waitBenchTimeout)
	for int(waited.Load()) < waiters {
		if time.Now().After(deadline) {
			return benchWaitersResult{}, fmt.Errorf("only %d of %d runs wait after %s", waited.Load(), waiters, waitBenchTimeout)
		}
		progress(int(waited.Load()), waiters)
		select {
		case <-ctx.Done():
			return benchWaitersResult{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	setup := time.Since(start)

	var all, match, ifs []time.Duration
	for i := range events {
		id := orderID(i)
		sent := time.Now()
		if _, err := client.SendEvent(ctx, sdk.Event{Name: "bench.pay", Data: jsonRaw(`{"orderId":"` + id + `","ref":"` + id + `","amount":` + strconv.Itoa(i+1) + `}`)}); err != nil {
			return benchWaitersResult{}, err
		}
		select {
		case at := <-woken[id]:
			d := at.Sub(sent)
			all = append(all, d)
			if i%2 == 0 {
				match = append(match, d)
			} else {
				ifs = append(ifs, d)
			}
		case <-time.After(time.Minute):
			return benchWaitersResult{}, fmt.Errorf("order %s: its run was not resumed within a minute", id)
		case <-ctx.Done():
			return benchWaitersResult{}, ctx.Err()
		}
		progress(i+1, events)
	}
	return benchWaitersResult{
		Waiters: waiters, If: cond, MatchWaiters: (waiters + 1) / 2, IfWaiters: waiters / 2, Events: events,
		SetupSec: round1(setup.Seconds()),
		P50Ms:    percentileMs(all, 0.50), P99Ms: percentileMs(all, 0.99),
		MatchP50Ms: percentileMs(match, 0.50), MatchP99Ms: percentileMs(match, 0.99),
		IfP50Ms: percentileMs(ifs, 0.50), IfP99Ms: percentileMs(ifs, 0.99),
		WrongWakes: wrong.Load(),
	}, nil
}

func orderID(i int) string { return "o" + strconv.Itoa(i) }

func orderNum(id string) int {
	n, _ := strconv.Atoi(id[1:])
	return n
}
