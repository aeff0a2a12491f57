package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/sdk"
)

// benchChaosResult is the JSON line `duraton bench chaos` ends with.
type benchChaosResult struct {
	Runs            int   `json:"runs"`
	RunsAcked       int   `json:"runs_acked"`
	RunsSucceeded   int   `json:"runs_succeeded"`
	RunsFailed      int   `json:"runs_failed"`
	RunsNotTerminal int   `json:"runs_not_terminal"`
	RunsLost        int   `json:"runs_lost"`
	StepsRecorded   int   `json:"steps_recorded"`
	DuplicateSteps  int   `json:"duplicate_steps"`
	StepExecutions  int64 `json:"step_executions"`
	Messages        int   `json:"messages"`
	MessagesAcked   int   `json:"messages_acked"`
	MessagesDeliv   int   `json:"messages_delivered"`
	MessagesDLQ     int   `json:"messages_dead_lettered"`
	MessagesLost    int   `json:"messages_lost"`
	Kills           int   `json:"kills"`
	// LiveRunsAtKills is, per kill, how many acknowledged runs had not finished yet.
	LiveRunsAtKills []int       `json:"live_runs_at_kills"`
	Starts          int         `json:"starts"`
	PublishRetries  int64       `json:"publish_retries"`
	Chaos           chaosCounts `json:"chaos"`
	ElapsedSec      float64     `json:"elapsed_s"`
	SettleSec       float64     `json:"settle_s"`
}

type chaosOptions struct {
	runs, messages, kills, concurrency int
	killEvery, settle                  time.Duration
	seed                               uint64
	bin                                string
	endpoint                           string // "go" or "ts-native"
	sdkDir                             string // ts-native: the @duraton/sdk package
}

func runBenchChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o chaosOptions
	fs.IntVar(&o.runs, "runs", 1000, "workflow runs (3 steps and a 1 s sleep each)")
	fs.IntVar(&o.messages, "messages", -1, "plain messages (default: as many as runs)")
	fs.IntVar(&o.kills, "kills", 5, "times the server is SIGKILLed and restarted")
	fs.DurationVar(&o.killEvery, "kill-every", 250*time.Millisecond, "least mean time between kills (uniform in ±50 %); kill k also waits for k/(kills+1) of the runs to finish")
	fs.IntVar(&o.concurrency, "concurrency", 16, "concurrent triggering and publishing clients")
	fs.DurationVar(&o.settle, "settle-timeout", 10*time.Minute, "how long to wait for every run and message to end after the last kill")
	seed := fs.Int64("seed", time.Now().UnixNano(), "seed of the chaos (endpoint behaviour and kill times)")
	fs.StringVar(&o.bin, "bin", "", "the duraton binary to run (default: this executable)")
	fs.StringVar(&o.endpoint, "endpoint", "go", "the workflow's endpoint: go (the Go SDK, in this process) or ts-native (@duraton/sdk in a node child, behind the same chaos)")
	fs.StringVar(&o.sdkDir, "sdk-dir", filepath.Join("sdk", "js"), "with --endpoint=ts-native: the @duraton/sdk package, installed and built (npm ci && npm run build)")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if o.endpoint != "go" && o.endpoint != "ts-native" {
		return fmt.Errorf("--endpoint is go or ts-native, not %q", o.endpoint)
	}
	if o.messages < 0 {
		o.messages = o.runs
	}
	o.seed = uint64(*seed)
	if o.runs < 0 || o.messages < 0 || o.runs+o.messages == 0 || o.kills < 0 || o.kills > 10_000 || o.concurrency < 1 || o.concurrency > 1000 || o.killEvery <= 0 {
		return errors.New("want --runs/--messages ≥ 0 (not both 0), --kills 0..10000, --concurrency 1..1000, --kill-every > 0")
	}
	if o.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the duraton binary: %w (pass --bin)", err)
		}
		o.bin = exe
	}
	// The load and the kill loop report from their own goroutines.
	progress := &syncWriter{w: stderr}
	logf := func(format string, a ...any) {
		if !*jsonOnly {
			progress.line(fmt.Sprintf(format, a...))
		}
	}
	res, err := benchChaos(ctx, o, logf)
	if perr := printJSONLine(stdout, res); perr != nil && err == nil {
		err = perr
	}
	return err
}

// benchChaos runs the chaos soak and checks its invariants: every acknowledged run ends
// (success or failure) with no step recorded twice, and every acknowledged message is
// delivered or dead-lettered. A violated invariant is an error (the counts still print).
func benchChaos(ctx context.Context, o chaosOptions, logf func(string, ...any)) (benchChaosResult, error) {
	res := benchChaosResult{Runs: o.runs, Messages: o.messages}
	dir, err := os.MkdirTemp("", "duraton-chaos-")
	if err != nil {
		return res, err
	}
	addr, err := freeAddr()
	if err != nil {
		return res, err
	}
	srv := &chaosServer{bin: o.bin, addr: addr, dataDir: dir, logDir: dir, args: []string{"--default-timeout", "2s", "--log-level", "warn"}}
	if err := srv.start(); err != nil {
		return res, err
	}
	defer srv.stop()
	logf("chaos: duraton on %s, data and logs in %s", addr, dir)

	ep := newChaosEndpoint(o.seed, srv.getenv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	base := "http://" + ln.Addr().String()
	if o.endpoint == "ts-native" {
		child, err := startChaosTSEndpoint(ctx, o.sdkDir, base, srv.getenv, ep)
		if err != nil {
			ln.Close()
			return res, err
		}
		defer child.close()
	}
	endpoint := &http.Server{Handler: ep, ReadHeaderTimeout: 10 * time.Second}
	go endpoint.Serve(ln)
	defer ep.close()
	defer endpoint.Close()
	client, err := sdk.NewClient(sdk.WithEnv(srv.getenv), sdk.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		return res, err
	}

	start := time.Now()
	killsDone := make(chan error, 1)
	var kills atomic.Int64
	acked := &chaosAcked{runs: map[string]bool{}, messages: map[int]bool{}}
	go func() { killsDone <- killLoop(ctx, srv, o, &kills, &res.LiveRunsAtKills, acked, ep, logf) }()

	loadChaos(ctx, client, base, o, acked, &res.PublishRetries, logf)
	if err := <-killsDone; err != nil {
		return res, err
	}
	res.Kills, res.Starts = int(kills.Load()), srv.starts
	res.ElapsedSec = round1(time.Since(start).Seconds())
	logf("chaos: load and %d kills done after %.1fs; waiting for the runs and messages to end", res.Kills, res.ElapsedSec)

	settleStart := time.Now()
	err = settle(ctx, client, ep, acked, o.settle)
	res.SettleSec = round1(time.Since(settleStart).Seconds())
	verr := verifyChaos(ctx, client, ep, acked, &res)
	res.StepExecutions, res.Chaos = ep.execs.Load(), ep.counts()
	if err == nil {
		err = verr
	}
	if err == nil && (res.RunsLost+res.RunsNotTerminal+res.DuplicateSteps+res.MessagesLost > 0) {
		err = fmt.Errorf("chaos: %d runs lost, %d not terminal, %d steps recorded twice, %d messages lost (logs in %s)",
			res.RunsLost, res.RunsNotTerminal, res.DuplicateSteps, res.MessagesLost, dir)
	}
	if err == nil {
		os.RemoveAll(dir)
	}
	return res, err
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// killLoop SIGKILLs the server o.kills times and starts it again. Kills are spread over
// the load: kill k waits until k/(kills+1) of the runs have finished, and at least
// --kill-every (jittered ±50 %) after the previous one, so that every kill hits runs in
// flight.
func killLoop(ctx context.Context, srv *chaosServer, o chaosOptions, kills *atomic.Int64, liveAtKills *[]int, acked *chaosAcked, ep *chaosEndpoint, logf func(string, ...any)) error {
	rng := rand.New(rand.NewPCG(o.seed+1, o.seed))
	for k := 1; k <= o.kills; k++ {
		gap := time.After(time.Duration((0.5 + rng.Float64()) * float64(o.killEvery)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-gap:
		}
		due := k * o.runs / (o.kills + 1)
		stalled := time.Now().Add(o.settle)
		for ep.finishedRuns() < due {
			if time.Now().After(stalled) {
				return fmt.Errorf("chaos: runs stopped finishing (%d of %d) before kill %d", ep.finishedRuns(), o.runs, k)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		live := acked.runCount() - ep.finishedRuns()
		srv.kill()
		kills.Add(1)
		*liveAtKills = append(*liveAtKills, live)
		if err := srv.start(); err != nil {
			return fmt.Errorf("restart after kill %d: %w", k, err)
		}
		logf("chaos: kill %d/%d with %d runs unfinished, restarted", k, o.kills, live)
	}
	return nil
}

// chaosAcked is what the server acknowledged: run ids and message numbers.
type chaosAcked struct {
	mu       sync.Mutex
	runs     map[string]bool
	messages map[int]bool
}

func (a *chaosAcked) runCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.runs)
}

// loadChaos triggers the runs and publishes the messages, retrying each until the
// server acknowledges it (the server is down now and then). A run or message that is
// never acknowledged is not counted against the server.
func loadChaos(ctx context.Context, client *sdk.Client, base string, o chaosOptions, acked *chaosAcked, retries *int64, logf func(string, ...any)) {
	retriesN, retryDelay := 30, "200"
	// Nothing fails a job: what is never acknowledged is simply not counted.
	_ = closedLoop(ctx, o.runs+o.messages, o.concurrency, func(i int) error {
		if i < o.runs {
			runID := "wfr_chaos_" + strconv.Itoa(i)
			ok := untilAcked(ctx, retries, func(ctx context.Context) error {
				_, err := client.Trigger(ctx, sdk.TriggerRequest{URL: base + "/wf", RunID: runID, Body: []byte(`{}`), Retries: &retriesN, RetryDelay: retryDelay})
				return err
			})
			if ok {
				acked.mu.Lock()
				acked.runs[runID] = true
				acked.mu.Unlock()
			}
			return nil
		}
		j := i - o.runs
		ok := untilAcked(ctx, retries, func(ctx context.Context) error {
			_, err := client.Publish(ctx, sdk.PublishRequest{URL: base + "/msg/" + strconv.Itoa(j), Body: []byte("m"),
				DeduplicationID: "chaos-" + strconv.Itoa(j), Retries: &retriesN, RetryDelay: retryDelay})
			return err
		})
		if ok {
			acked.mu.Lock()
			acked.messages[j] = true
			acked.mu.Unlock()
		}
		return nil
	})
	logf("chaos: %d runs and %d messages acknowledged", len(acked.runs), len(acked.messages))
}

// untilAcked calls fn until it succeeds, for at most two minutes. Errors are expected
// while the server is down; an API error (4xx) is not retried.
func untilAcked(ctx context.Context, retries *int64, fn func(context.Context) error) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		err := fn(ctx)
		if err == nil {
			return true
		}
		var apiErr *sdk.APIError
		if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 && apiErr.Status != http.StatusTooManyRequests {
			return false
		}
		atomic.AddInt64(retries, 1)
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// settle waits until no acknowledged run is live and every acknowledged message has
// been delivered or dead-lettered.
func settle(ctx context.Context, client *sdk.Client, ep *chaosEndpoint, acked *chaosAcked, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		live, err := client.RunLogs(ctx, sdk.RunLogsRequest{State: sdk.RunStarted, Count: 1})
		if err == nil && len(live.Runs) == 0 {
			dead, err := deadMessages(ctx, client)
			if err == nil && allEnded(acked, ep, dead) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: runs or messages still pending %s after the last kill", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func allEnded(acked *chaosAcked, ep *chaosEndpoint, dead map[int]bool) bool {
	for j := range acked.messages {
		if !ep.wasDelivered(j) && !dead[j] {
			return false
		}
	}
	return true
}

// deadMessages lists the numbers of the plain messages in the DLQ.
func deadMessages(ctx context.Context, client *sdk.Client) (map[int]bool, error) {
	dead := map[int]bool{}
	cursor := ""
	for {
		page, err := client.DLQ(ctx, sdk.DLQRequest{Cursor: cursor, Count: 1000})
		if err != nil {
			return nil, fmt.Errorf("chaos: list dead letters: %w", err)
		}
		for _, d := range page.Messages {
			if _, n, ok := strings.Cut(d.URL, "/msg/"); ok {
				if j, err := strconv.Atoi(n); err == nil {
					dead[j] = true
				}
			}
		}
		if cursor = page.Cursor; cursor == "" {
			return dead, nil
		}
	}
}

// verifyChaos reads every run and dead letter back and fills the result's counts.
func verifyChaos(ctx context.Context, client *sdk.Client, ep *chaosEndpoint, acked *chaosAcked, res *benchChaosResult) error {
	res.RunsAcked, res.MessagesAcked = len(acked.runs), len(acked.messages)
	seen := map[string]bool{}
	cursor := ""
	for {
		page, err := client.RunLogs(ctx, sdk.RunLogsRequest{Cursor: cursor, Count: 1000})
		if err != nil {
			return fmt.Errorf("chaos: list runs: %w", err)
		}
		for _, r := range page.Runs {
			if !strings.HasPrefix(r.RunID, "wfr_chaos_") {
				continue
			}
			seen[r.RunID] = true
			switch r.State {
			case sdk.RunSuccess:
				res.RunsSucceeded++
			case sdk.RunFailed, sdk.RunCanceled:
				res.RunsFailed++
			default:
				res.RunsNotTerminal++
			}
			steps := map[int]int{}
			for _, g := range r.Steps {
				for _, s := range g.Steps {
					if id := s.StepID(); id > 0 && (s.CallType() == "" || s.CallType() == "step") {
						steps[id]++
					}
				}
			}
			for _, n := range steps {
				res.StepsRecorded++
				res.DuplicateSteps += n - 1
			}
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	for id := range acked.runs {
		if !seen[id] {
			res.RunsLost++
		}
	}
	dead, err := deadMessages(ctx, client)
	if err != nil {
		return err
	}
	for j := range acked.messages {
		switch {
		case ep.wasDelivered(j):
			res.MessagesDeliv++
		case dead[j]:
			res.MessagesDLQ++
		default:
			res.MessagesLost++
		}
	}
	return nil
}
