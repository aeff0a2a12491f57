package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// benchWorkflowExternal is `bench workflow --endpoint=external`: the server (`bench
// _server`) and the Go SDK endpoint (`bench _wf-endpoint`) run in two child processes and
// this process only triggers runs and waits for their "done" lines, so each side's CPU
// time (its own getrusage, sampled before and after the measured interval) is its alone.
func benchWorkflowExternal(ctx context.Context, runs, steps, conc int, ep wfEndpoint, bs benchStore, cpuProfile, memProfile, endpointProfile string, progress func(done, total int)) (benchWorkflowResult, error) {
	var server interface{ Stats() (childStats, error) }
	var serverURLs []string
	var rs *benchReplicas
	tokens := []string{servertest.Token}
	if bs.replicas > 0 {
		if cpuProfile != "" || memProfile != "" {
			return benchWorkflowResult{}, errors.New("--cpuprofile and --memprofile profile the bench server child, not --replicas")
		}
		if bs.projects > 0 && ep.kind != "go" {
			return benchWorkflowResult{}, errors.New("--projects needs --endpoint=external: the Go endpoint answers every step inline, so it never calls back with a token")
		}
		projTokens, err := benchProjectTokens(ctx, bs.url, bs.shards, bs.projects)
		if err != nil {
			return benchWorkflowResult{}, err
		}
		if len(projTokens) > 0 {
			tokens = projTokens
		}
		if rs, err = startBenchReplicas(ctx, bs.url, bs.replicas, 512, bs.shards); err != nil {
			return benchWorkflowResult{}, err
		}
		defer rs.close()
		server, serverURLs = rs, rs.URLs
	} else {
		serverArgs := []string{"_server", "--max-in-flight", "512"}
		if cpuProfile != "" {
			serverArgs = append(serverArgs, "--cpuprofile", cpuProfile)
		}
		if memProfile != "" {
			serverArgs = append(serverArgs, "--memprofile", memProfile)
		}
		if bs.url != "" {
			serverArgs = append(serverArgs, "--store", bs.url)
		}
		child, err := startBenchChild(ctx, nil, nil, serverArgs...)
		if err != nil {
			return benchWorkflowResult{}, err
		}
		defer child.close()
		server, serverURLs = child, []string{child.URL}
	}
	// The endpoint publishes its steps to the first server (a follower, with replicas).
	env := devEnv(serverURLs[0])

	var mu sync.Mutex
	started := map[string]time.Time{}
	done := map[string]chan struct{}{}
	var finished []time.Duration
	onLine := func(line string) {
		id, ok := strings.CutPrefix(line, "done ")
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if ch, ok := done[id]; ok {
			finished = append(finished, time.Since(started[id]))
			close(ch)
			delete(done, id)
		}
	}
	var endpoint *benchChild
	var err error
	if ep.kind != "go" {
		if endpointProfile != "" {
			return benchWorkflowResult{}, errors.New("--endpoint-cpuprofile is for the Go endpoint (--endpoint=external); profile node with --cpu-prof yourself")
		}
		endpoint, err = startTSEndpoint(ctx, ep, steps, env, onLine)
	} else {
		endpointArgs := []string{"_wf-endpoint", "--steps", strconv.Itoa(steps)}
		if endpointProfile != "" {
			endpointArgs = append(endpointArgs, "--cpuprofile", endpointProfile)
		}
		endpoint, err = startBenchChild(ctx, env, onLine, endpointArgs...)
	}
	if err != nil {
		return benchWorkflowResult{}, err
	}
	defer endpoint.close()
	url := endpoint.URL + "/wf"
	// Runs are triggered through every server in turn, and over the projects in turn.
	clients := make([]*sdk.Client, len(serverURLs)*len(tokens))
	transport := &http.Transport{MaxIdleConnsPerHost: conc}
	for i, u := range serverURLs {
		for j, tok := range tokens {
			env := append(devEnv(u), "QSTASH_TOKEN="+tok) // the later value wins
			c, err := sdk.NewClient(sdk.WithEnv(envFunc(env)), sdk.WithHTTPClient(&http.Client{Transport: transport}))
			if err != nil {
				return benchWorkflowResult{}, err
			}
			clients[i*len(tokens)+j] = c
		}
	}
	var shares0 []replicaShare
	if rs != nil {
		if shares0, err = rs.shares(ctx); err != nil {
			return benchWorkflowResult{}, err
		}
	}

	var pg *pgCPU
	if bs.url != "" {
		p, ok, err := findPGCPU(ctx, bs.url)
		if err != nil {
			return benchWorkflowResult{}, err
		}
		if ok {
			pg = p
		}
	}
	var pg0, pg1 int64
	if pg != nil {
		if pg0, err = pg.Us(); err != nil {
			return benchWorkflowResult{}, err
		}
	}
	srv0, err := server.Stats()
	if err != nil {
		return benchWorkflowResult{}, err
	}
	ep0, err := endpoint.Stats()
	if err != nil {
		return benchWorkflowResult{}, err
	}
	var completed atomic.Int64
	stopProgress := reportProgress(&completed, runs, progress)
	start := time.Now()
	firstErr := closedLoop(ctx, runs, conc, func(i int) error {
		runID := "wfr_bench_" + strconv.Itoa(i)
		ch := make(chan struct{})
		mu.Lock()
		done[runID], started[runID] = ch, time.Now()
		mu.Unlock()
		if _, err := clients[i%len(clients)].Trigger(ctx, sdk.TriggerRequest{URL: url, RunID: runID, Body: []byte(`{}`)}); err != nil {
			return err
		}
		select {
		case <-ch:
			completed.Add(1)
			return nil
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("run %s did not finish within 2 minutes", runID)
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	elapsed := time.Since(start)
	stopProgress()
	if firstErr != nil {
		return benchWorkflowResult{}, firstErr
	}
	srv1, err := server.Stats()
	if err != nil {
		return benchWorkflowResult{}, err
	}
	if pg != nil {
		if pg1, err = pg.Us(); err != nil {
			return benchWorkflowResult{}, err
		}
	}
	ep1, err := endpoint.Stats()
	if err != nil {
		return benchWorkflowResult{}, err
	}
	var shares []replicaShare
	if rs != nil {
		after, err := rs.shares(ctx)
		if err != nil {
			return benchWorkflowResult{}, err
		}
		if shares, err = shareDelta(shares0, after); err != nil {
			return benchWorkflowResult{}, err
		}
	}
	progress(runs, runs)
	overheads := make([]time.Duration, len(ep1.Overheads))
	for i, o := range ep1.Overheads {
		overheads[i] = time.Duration(o)
	}
	total := float64(runs * steps)
	mu.Lock()
	defer mu.Unlock()
	return benchWorkflowResult{
		Endpoint:      ep.name(),
		commitFigures: commitFiguresOf(srv0, srv1),
		Runs:          runs, Steps: steps, Concurrency: conc,
		StepsPerSec:          round1(total / elapsed.Seconds()),
		RunsPerSec:           round1(float64(runs) / elapsed.Seconds()),
		RunP50Ms:             percentileMs(finished, 0.50),
		RunP99Ms:             percentileMs(finished, 0.99),
		OverheadP50Ms:        percentileMs(overheads, 0.50),
		OverheadP99Ms:        percentileMs(overheads, 0.99),
		DuplicateRounds:      ep1.Dups,
		ServerCPUUsPerStep:   round1(float64(srv1.CPUUs-srv0.CPUUs) / total),
		EndpointCPUUsPerStep: round1(float64(ep1.CPUUs-ep0.CPUUs) / total),
		ServerCPUUsPerRun:    round1(float64(srv1.CPUUs-srv0.CPUUs) / float64(runs)),
		EndpointCPUUsPerRun:  round1(float64(ep1.CPUUs-ep0.CPUUs) / float64(runs)),
		PostgresCPUUsPerStep: round1(float64(pg1-pg0) / total),
		Projects:             bs.projects,
		Replicas:             shares,
	}, nil
}
