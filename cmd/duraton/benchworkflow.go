package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// benchWorkflowResult is the JSON line `duraton bench workflow` ends with.
type benchWorkflowResult struct {
	Runs            int     `json:"runs"`
	Steps           int     `json:"steps"`
	Concurrency     int     `json:"concurrency"`
	StepsPerSec     float64 `json:"steps_per_sec"`
	RunsPerSec      float64 `json:"runs_per_sec"`
	RunP50Ms        float64 `json:"run_latency_p50_ms"`
	RunP99Ms        float64 `json:"run_latency_p99_ms"`
	OverheadP50Ms   float64 `json:"step_overhead_p50_ms"`
	OverheadP99Ms   float64 `json:"step_overhead_p99_ms"`
	DuplicateRounds int64   `json:"duplicate_deliveries"`
	commitFigures
	// With --endpoint=external only: CPU time (getrusage) of the server's and the
	// endpoint's process over the measured interval, per step completed.
	Endpoint             string  `json:"endpoint"`
	ServerCPUUsPerStep   float64 `json:"server_cpu_us_per_step,omitempty"`
	EndpointCPUUsPerStep float64 `json:"endpoint_cpu_us_per_step,omitempty"`
	ServerCPUUsPerRun    float64 `json:"server_cpu_us_per_run,omitempty"`
	EndpointCPUUsPerRun  float64 `json:"endpoint_cpu_us_per_run,omitempty"`
	// With --store, when PostgreSQL runs on this machine: its own CPU time (every
	// process of the server, benchpgcpu.go) over the measured interval, per step.
	PostgresCPUUsPerStep float64 `json:"postgres_cpu_us_per_step,omitempty"`
	// With --replicas: the projects the runs were spread over, and each replica's part.
	Projects int            `json:"projects,omitempty"`
	Replicas []replicaShare `json:"replicas,omitempty"`
}

func runBenchWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench workflow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 2000, "workflow runs")
	steps := fs.Int("steps", 3, "noop steps per run")
	conc := fs.Int("concurrency", 64, "runs in flight at once")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (with --endpoint=external: of the server process only)")
	memProfile := fs.String("memprofile", "", "with --endpoint=external: write the server process's allocation profile to this file")
	endpointProfile := fs.String("endpoint-cpuprofile", "", "with --endpoint=external: write the endpoint process's CPU profile to this file")
	endpoint := fs.String("endpoint", "inprocess", "inprocess: server, endpoint and load in one process; external: the server and the Go SDK endpoint each in a child process, with their CPU per step and per run; ts: as external, but the endpoint is the official @upstash/workflow serve() in a node child process; ts-native: as ts, with @duraton/sdk's serve() (inline answers)")
	tsDir := fs.String("ts-dir", filepath.Join("cmd", "duraton", "testdata", "compat"), "with --endpoint=ts: the directory holding bench/wf-endpoint.mjs and node_modules/@upstash/workflow (npm ci --prefix <dir>)")
	sdkDir := fs.String("sdk-dir", filepath.Join("sdk", "js"), "with --endpoint=ts-native: the @duraton/sdk package, installed and built (npm ci && npm run build)")
	store := fs.String("store", "", "postgres:// URL of an empty database to run the server on (needs --endpoint=external or ts); empty: a fresh bbolt file")
	replicas := fs.Int("replicas", 0, "with --store: run this many `duraton serve` replicas on it instead of one bench server; runs are triggered through all of them")
	shards := fs.Int("shards", 16, "with --replicas: the shards a new database is divided into")
	projects := fs.Int("projects", 0, "with --replicas: spread the runs over this many projects (made in the database first); 0: project default")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if err := checkBenchStore(*store, *endpoint != "inprocess", *replicas, *shards, *projects); err != nil {
		return err
	}
	if *runs < 1 || *steps < 1 || *steps > 100 || *conc < 1 || *conc > 10_000 {
		return errors.New("want --runs ≥ 1, --steps 1..100, --concurrency 1..10000")
	}
	progress := progressWriter(stderr, *jsonOnly)
	switch *endpoint {
	case "external", "ts", "ts-native":
		ep := wfEndpoint{kind: "go"}
		switch *endpoint {
		case "ts":
			ep = wfEndpoint{kind: "ts", tsDir: *tsDir}
		case "ts-native":
			ep = wfEndpoint{kind: "ts-native", tsDir: *sdkDir}
		}
		res, err := benchWorkflowExternal(ctx, *runs, *steps, *conc, ep, benchStore{url: *store, replicas: *replicas, shards: *shards, projects: *projects}, *cpuProfile, *memProfile, *endpointProfile, progress)
		if err != nil {
			return err
		}
		return printJSONLine(stdout, res)
	case "inprocess":
	default:
		return fmt.Errorf("--endpoint is inprocess, external, ts or ts-native, not %q", *endpoint)
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	res, err := benchWorkflow(ctx, *runs, *steps, *conc, progress)
	if err != nil {
		return err
	}
	return printJSONLine(stdout, res)
}

// wfRecorder measures a benchmark's runs from inside the workflow route.
type wfRecorder struct {
	mu        sync.Mutex
	started   map[string]time.Time     // run → trigger time
	lastStep  map[string]time.Time     // run → when its last step function ran
	done      map[string]chan struct{} // run → closed at its last delivery
	finished  []time.Duration
	overheads []time.Duration
	dups      atomic.Int64
}

// benchWorkflow runs an in-process Duraton and a Go SDK workflow endpoint on loopback,
// and pushes `runs` runs of an S-step noop workflow through them, `conc` at a time.
// Run latency is trigger → the run's last delivery; step overhead is a step function's
// end → the start of the delivery that follows it (publish, commit, dispatch, send).
func benchWorkflow(ctx context.Context, runs, steps, conc int, progress func(done, total int)) (benchWorkflowResult, error) {
	srv, err := servertest.Start(servertest.Options{Engine: delivery.Config{MaxInFlight: 512}})
	if err != nil {
		return benchWorkflowResult{}, err
	}
	defer srv.Close()
	rec := &wfRecorder{started: map[string]time.Time{}, lastStep: map[string]time.Time{}, done: map[string]chan struct{}{}}
	route := func(c *sdk.Context) (any, error) {
		now := time.Now()
		rec.mu.Lock()
		if last, ok := rec.lastStep[c.RunID]; ok {
			rec.overheads = append(rec.overheads, now.Sub(last))
			delete(rec.lastStep, c.RunID)
		}
		rec.mu.Unlock()
		for i := 0; i < steps; i++ {
			if _, err := sdk.Run(c, "s"+strconv.Itoa(i), func() (int, error) {
				rec.mu.Lock()
				rec.lastStep[c.RunID] = time.Now()
				rec.mu.Unlock()
				return i, nil
			}); err != nil {
				return nil, err
			}
		}
		rec.mu.Lock()
		if ch, ok := rec.done[c.RunID]; ok {
			rec.finished = append(rec.finished, time.Since(rec.started[c.RunID]))
			close(ch)
			delete(rec.done, c.RunID)
		} else {
			rec.dups.Add(1)
		}
		rec.mu.Unlock()
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return benchWorkflowResult{}, err
	}
	endpoint := &http.Server{Handler: sdk.Serve(route, sdk.WithServeEnv(srv.Env()))}
	go endpoint.Serve(ln)
	defer endpoint.Close()
	url := "http://" + ln.Addr().String() + "/wf"
	client, err := sdk.NewClient(sdk.WithEnv(srv.Env()), sdk.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}))
	if err != nil {
		return benchWorkflowResult{}, err
	}

	var completed atomic.Int64
	stopProgress := reportProgress(&completed, runs, progress)
	start := time.Now()
	firstErr := closedLoop(ctx, runs, conc, func(i int) error {
		runID := "wfr_bench_" + strconv.Itoa(i)
		ch := make(chan struct{})
		rec.mu.Lock()
		rec.done[runID], rec.started[runID] = ch, time.Now()
		rec.mu.Unlock()
		if _, err := client.Trigger(ctx, sdk.TriggerRequest{URL: url, RunID: runID, Body: []byte(`{}`)}); err != nil {
			return err
		}
		select {
		case <-ch:
			completed.Add(1)
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("run %s did not finish within 2 minutes", runID)
		case <-ctx.Done():
			return nil
		}
	})
	elapsed := time.Since(start)
	stopProgress()
	if firstErr != nil {
		return benchWorkflowResult{}, firstErr
	}
	progress(runs, runs)
	st := srv.StoreStats()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return benchWorkflowResult{
		Endpoint:      "inprocess",
		commitFigures: commitFiguresOf(childStats{}, storeChildStats(st)),
		Runs:          runs, Steps: steps, Concurrency: conc,
		StepsPerSec:     round1(float64(runs*steps) / elapsed.Seconds()),
		RunsPerSec:      round1(float64(runs) / elapsed.Seconds()),
		RunP50Ms:        percentileMs(rec.finished, 0.50),
		RunP99Ms:        percentileMs(rec.finished, 0.99),
		OverheadP50Ms:   percentileMs(rec.overheads, 0.50),
		OverheadP99Ms:   percentileMs(rec.overheads, 0.99),
		DuplicateRounds: rec.dups.Load(),
	}, nil
}
