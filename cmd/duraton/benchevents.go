package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// benchEventsResult is the JSON line `duraton bench events` ends with.
type benchEventsResult struct {
	Events          int     `json:"events"`
	PerRequest      int     `json:"events_per_request"`
	Concurrency     int     `json:"concurrency"`
	FanOut          int     `json:"fan_out"`
	AcceptedPerSec  float64 `json:"events_accepted_per_sec"`
	RunsPerSec      float64 `json:"runs_first_delivered_per_sec"`
	LoadedP50Ms     float64 `json:"loaded_event_to_first_delivery_p50_ms"`
	LoadedP99Ms     float64 `json:"loaded_event_to_first_delivery_p99_ms"`
	LowLoadEvents   int     `json:"low_load_events"`
	LowLoadP50Ms    float64 `json:"low_load_event_to_first_delivery_p50_ms"`
	LowLoadP99Ms    float64 `json:"low_load_event_to_first_delivery_p99_ms"`
	DuplicateDelivs int64   `json:"duplicate_first_deliveries"`
}

func runBenchEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	events := fs.Int("events", 10_000, "events sent under load")
	per := fs.Int("per-request", 1, "events per POST /events (1..1000)")
	conc := fs.Int("concurrency", 64, "concurrent sending clients")
	fanOut := fs.Int("fan-out", 2, "workflows each event starts a run of (1..10)")
	low := fs.Int("low-load", 200, "events sent one at a time (each waits for its runs' first deliveries) for the low-load latency")
	waiters := fs.Int("waiters", 0, "the correlated-wait case instead: this many runs wait for one event name (half match, half if), then --waiter-events events wake one each (0: off; at most 100000)")
	waiterEvents := fs.Int("waiter-events", 200, "with --waiters: events sent one at a time, each waking one waiting run")
	waiterIf := fs.String("waiter-if", "async.data.orderId == event.data.orderId && async.data.amount > 0", "with --waiters: the condition of the `if` half (an order's pay event has data.orderId and data.amount > 0; data.ref is its orderId too)")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *events < 1 || *per < 1 || *per > 1000 || *conc < 1 || *conc > 10_000 || *low < 0 || *fanOut < 1 || *fanOut > 10 {
		return errors.New("want --events ≥ 1, --per-request 1..1000, --concurrency 1..10000, --fan-out 1..10, --low-load ≥ 0")
	}
	if *waiters < 0 || *waiters > 100_000 || *waiterEvents < 1 {
		return errors.New("want --waiters 0..100000 and --waiter-events ≥ 1")
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if *waiters > 0 {
		res, err := benchWaiters(ctx, *waiters, min(*waiterEvents, *waiters), *waiterIf, progressWriter(stderr, *jsonOnly))
		if err != nil {
			return err
		}
		return printJSONLine(stdout, res)
	}
	res, err := benchEvents(ctx, *events, *per, *conc, *low, *fanOut, progressWriter(stderr, *jsonOnly))
	if err != nil {
		return err
	}
	return printJSONLine(stdout, res)
}

// eventRecorder records the first delivery of each (event, workflow) run.
type eventRecorder struct {
	mu      sync.Mutex
	seen    map[string]bool // event id + workflow
	lat     []time.Duration
	arrived chan struct{}
	dups    atomic.Int64
}

// benchEvents runs an in-process Duraton with the native API and a Go SDK endpoint on
// loopback serving fanOut workflows triggered by the same event. Each event
// carries its send time; the route records send → its run's first delivery. Under load
// conc clients send `events` events, perReq per request; then `low` events go one at a
// time, each after the previous one's runs were first delivered.
func benchEvents(ctx context.Context, events, perReq, conc, low, fanOut int, progress func(done, total int)) (benchEventsResult, error) {
	srv, err := servertest.Start(servertest.Options{Engine: delivery.Config{MaxInFlight: 512}})
	if err != nil {
		return benchEventsResult{}, err
	}
	defer srv.Close()
	rec := &eventRecorder{seen: map[string]bool{}, arrived: make(chan struct{}, 1)}
	route := func(c *sdk.Context) (any, error) {
		now := time.Now()
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(errors.New("not a native run"))
		}
		var data struct{ T int64 }
		if err := ev.Decode(&data); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		k := ev.ID + "\x00" + c.Workflow()
		rec.mu.Lock()
		if rec.seen[k] {
			rec.dups.Add(1)
		} else {
			rec.seen[k] = true
			rec.lat = append(rec.lat, now.Sub(time.Unix(0, data.T)))
		}
		rec.mu.Unlock()
		select {
		case rec.arrived <- struct{}{}:
		default:
		}
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return benchEventsResult{}, err
	}
	endpoint := &http.Server{Handler: sdk.Serve(route, sdk.WithServeEnv(srv.Env()))}
	go endpoint.Serve(ln)
	defer endpoint.Close()
	url := "http://" + ln.Addr().String()
	client, err := sdk.NewClient(sdk.WithEnv(srv.Env()), sdk.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}))
	if err != nil {
		return benchEventsResult{}, err
	}
	// The endpoint above serves every workflow, so the app only registers them.
	var workflows []sdk.Workflow
	for i := range fanOut {
		name := "w" + strconv.Itoa(i+1)
		workflows = append(workflows, sdk.Workflow{Name: "bench." + name, URL: url + "/" + name, Triggers: []string{"bench.event"}})
	}
	app, err := sdk.NewApp("bench", "", workflows)
	if err != nil {
		return benchEventsResult{}, err
	}
	if _, err := client.RegisterApp(ctx, app); err != nil {
		return benchEventsResult{}, err
	}
	delivered := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.lat)
	}
	// waitFor waits until n first deliveries were recorded (or a minute passed).
	waitFor := func(n int) error {
		deadline := time.NewTimer(time.Minute)
		defer deadline.Stop()
		for delivered() < n {
			select {
			case <-rec.arrived:
			case <-deadline.C:
				return fmt.Errorf("only %d of %d runs were first delivered within a minute", delivered(), n)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	send := func(n int) error {
		evs := make([]sdk.Event, n)
		t := strconv.FormatInt(time.Now().UnixNano(), 10)
		for i := range evs {
			evs[i] = sdk.Event{Name: "bench.event", Data: jsonRaw(`{"t":` + t + `}`)}
		}
		res, err := client.SendEvents(ctx, evs)
		if err != nil {
			return err
		}
		for _, r := range res {
			started := 0
			for _, run := range r.Runs {
				if run.Started() {
					started++
				}
			}
			if len(r.Runs) != fanOut || started != fanOut {
				return fmt.Errorf("event %s: want %d runs started, got %+v", r.ID, fanOut, r.Runs)
			}
		}
		return nil
	}

	// Under load.
	requests := (events + perReq - 1) / perReq
	var sent atomic.Int64
	start := time.Now()
	err = closedLoop(ctx, requests, conc, func(i int) error {
		n := min(perReq, events-i*perReq)
		if err := send(n); err != nil {
			return err
		}
		progress(int(sent.Add(int64(n))), events)
		return nil
	})
	accepted := time.Since(start)
	if err != nil {
		return benchEventsResult{}, err
	}
	if err := waitFor(events * fanOut); err != nil {
		return benchEventsResult{}, err
	}
	all := time.Since(start)
	rec.mu.Lock()
	loaded := append([]time.Duration(nil), rec.lat...)
	rec.mu.Unlock()

	// Low load: one event at a time.
	for i := 0; i < low; i++ {
		if err := send(1); err != nil {
			return benchEventsResult{}, err
		}
		if err := waitFor((events + i + 1) * fanOut); err != nil {
			return benchEventsResult{}, err
		}
	}
	rec.mu.Lock()
	lowLat := append([]time.Duration(nil), rec.lat[events*fanOut:]...)
	rec.mu.Unlock()
	return benchEventsResult{
		Events: events, PerRequest: perReq, Concurrency: conc, FanOut: fanOut,
		AcceptedPerSec: round1(float64(events) / accepted.Seconds()),
		RunsPerSec:     round1(float64(events*fanOut) / all.Seconds()),
		LoadedP50Ms:    percentileMs(loaded, 0.50), LoadedP99Ms: percentileMs(loaded, 0.99),
		LowLoadEvents: low,
		LowLoadP50Ms:  percentileMs(lowLat, 0.50), LowLoadP99Ms: percentileMs(lowLat, 0.99),
		DuplicateDelivs: rec.dups.Load(),
	}, nil
}

// jsonRaw is event data already encoded as JSON.
type jsonRaw string

// MarshalJSON implements json.Marshaler.
func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(strings.TrimSpace(string(j))), nil }
