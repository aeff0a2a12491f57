package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server/servertest"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "flow" {
		return runBenchFlow(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "workflow" {
		return runBenchWorkflow(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "events" {
		return runBenchEvents(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "_server" { // hidden: a benchmark's server child
		return runBenchServerChild(args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "_wf-endpoint" { // hidden: a benchmark's endpoint child
		return runBenchWorkflowEndpointChild(args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "chaos" {
		return runBenchChaos(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "http-floor" {
		return runBenchFloor(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "publish" {
		fmt.Fprintln(stderr, "usage: duraton bench publish [--messages N] [--concurrency C] [--json]\n       duraton bench flow [--keys N] [--queued N] [--sample N] [--json]\n       duraton bench workflow [--runs N] [--steps S] [--concurrency C] [--json]\n       duraton bench events [--events N] [--per-request N] [--concurrency C] [--low-load N] [--json]\n       duraton bench chaos [--runs N] [--messages N] [--kills K] [--kill-every D] [--json]\n       duraton bench http-floor [--shape publish|workflow] [--ops N] [--steps S] [--concurrency C] [--json]")
		return errUsage
	}
	fs := flag.NewFlagSet("bench publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("messages", 20000, "messages to publish")
	c := fs.Int("concurrency", 64, "concurrent publishing clients")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (with --server=external: of the server process only)")
	serverMode := fs.String("server", "inprocess", "inprocess: everything in one process; external: the server in a child process, with its CPU per message")
	store := fs.String("store", "", "postgres:// URL of an empty database to run the server on (needs --server=external); empty: a fresh bbolt file")
	replicas := fs.Int("replicas", 0, "with --store: run this many `duraton serve` replicas on it instead of one bench server, publishing through all of them")
	shards := fs.Int("shards", 16, "with --replicas: the shards a new database is divided into")
	projects := fs.Int("projects", 0, "with --replicas: spread the messages over this many projects (made in the database first); 0: project default")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if err := checkBenchStore(*store, *serverMode == "external", *replicas, *shards, *projects); err != nil {
		return err
	}
	if *serverMode != "inprocess" && *serverMode != "external" {
		return fmt.Errorf("--server is inprocess or external, not %q", *serverMode)
	}
	external := *serverMode == "external"
	profile := *cpuProfile
	if external {
		profile = "" // the child profiles itself
	}
	stop, err := startCPUProfile(profile)
	if err != nil {
		return err
	}
	defer stop()
	if *n < 1 || *c < 1 || *c > 10_000 {
		return errors.New("--messages must be ≥ 1 and --concurrency between 1 and 10000")
	}
	res, err := benchPublish(ctx, *n, *c, publishServer{external: external, cpuProfile: *cpuProfile,
		bs: benchStore{url: *store, replicas: *replicas, shards: *shards, projects: *projects}}, progressWriter(stderr, *jsonOnly))
	if err != nil {
		return err
	}
	return printJSONLine(stdout, res)
}

// commitFigures are the group commit's figures over a benchmark, in both result lines.
type commitFigures struct {
	OpsPerCommit      float64 `json:"ops_per_commit"`
	CommitMeanUs      float64 `json:"commit_mean_us"`
	PagesPerCommit    float64 `json:"pages_per_commit,omitempty"`     // bbolt page writes (by checkpoints) per commit
	LogBytesPerCommit float64 `json:"log_bytes_per_commit,omitempty"` // write-ahead log bytes per commit
	Checkpoints       int64   `json:"checkpoints,omitempty"`          // checkpoints of the log into bbolt
}

// commitFiguresOf is what the store did between two of its stats.
func commitFiguresOf(before, after childStats) commitFigures {
	commits := float64(max(after.Commits-before.Commits, 1))
	return commitFigures{
		OpsPerCommit:      round1(float64(after.Ops-before.Ops) / commits),
		CommitMeanUs:      round1(float64(after.CommitUs-before.CommitUs) / commits),
		PagesPerCommit:    round1(float64(after.Pages-before.Pages) / commits),
		LogBytesPerCommit: round1(float64(after.LogBytes-before.LogBytes) / commits),
		Checkpoints:       after.Ckpts - before.Ckpts,
	}
}

// benchResult is the JSON line `duraton bench publish` ends with.
type benchResult struct {
	Messages        int     `json:"messages"`
	Concurrency     int     `json:"concurrency"`
	PublishPerSec   float64 `json:"publish_per_sec"`
	DeliveredPerSec float64 `json:"delivered_per_sec"`
	LatencyP50Ms    float64 `json:"latency_p50_ms"`
	LatencyP99Ms    float64 `json:"latency_p99_ms"`
	Duplicates      int64   `json:"duplicates"`
	commitFigures
	// With --server=external only: the server process's CPU time (getrusage) from the
	// first publish to the last delivery, per message.
	Server                string  `json:"server"`
	ServerCPUUsPerMessage float64 `json:"server_cpu_us_per_message,omitempty"`
	// With --replicas: the projects the load was spread over, and each replica's part.
	Projects int            `json:"projects,omitempty"`
	Replicas []replicaShare `json:"replicas,omitempty"`
}

// publishServer says where `bench publish`'s server runs.
type publishServer struct {
	external   bool   // in a `bench _server` child process
	cpuProfile string // the child's CPU profile, when external
	bs         benchStore
}

// benchPublish runs a server on a fresh temporary store and a no-op endpoint, both on
// loopback, publishes n messages from c clients and waits until every one was delivered.
// Latency is publish start → delivery received, read from a timestamp in the body.
func benchPublish(ctx context.Context, n, c int, where publishServer, progress func(done, total int)) (benchResult, error) {
	var serverURL string
	var serverURLs []string // publishers take turns over these
	var stats func() (childStats, error)
	var rs *benchReplicas
	tokens := []string{servertest.Token}
	if where.bs.replicas > 0 {
		projTokens, err := benchProjectTokens(ctx, where.bs.url, where.bs.shards, where.bs.projects)
		if err != nil {
			return benchResult{}, err
		}
		if len(projTokens) > 0 {
			tokens = projTokens
		}
		if rs, err = startBenchReplicas(ctx, where.bs.url, where.bs.replicas, 256, where.bs.shards); err != nil {
			return benchResult{}, err
		}
		defer rs.close()
		serverURL, serverURLs, stats = rs.URLs[0], rs.URLs, rs.Stats
	} else if where.external {
		args := []string{"_server", "--max-in-flight", "256"}
		if where.cpuProfile != "" {
			args = append(args, "--cpuprofile", where.cpuProfile)
		}
		if where.bs.url != "" {
			args = append(args, "--store", where.bs.url)
		}
		child, err := startBenchChild(ctx, nil, nil, args...)
		if err != nil {
			return benchResult{}, err
		}
		defer child.close()
		serverURL, stats = child.URL, child.Stats
	} else {
		srv, err := servertest.Start(servertest.Options{Engine: delivery.Config{MaxInFlight: 256}})
		if err != nil {
			return benchResult{}, err
		}
		defer srv.Close()
		serverURL = srv.URL
		stats = func() (childStats, error) {
			return storeChildStats(srv.StoreStats()), nil
		}
	}

	// The endpoint: records each message's latency once.
	latencies := make([]time.Duration, n)
	seen := make([]atomic.Bool, n)
	var delivered, dups atomic.Int64
	allDone := make(chan struct{})
	endpoint := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		idx, t0, ok := bytes.Cut(body, []byte{' '})
		i, err1 := strconv.Atoi(string(idx))
		ns, err2 := strconv.ParseInt(string(t0), 10, 64)
		if !ok || err1 != nil || err2 != nil || i < 0 || i >= n {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if seen[i].Swap(true) {
			dups.Add(1)
		} else {
			latencies[i] = time.Duration(time.Now().UnixNano() - ns)
			if delivered.Add(1) == int64(n) {
				close(allDone)
			}
		}
		w.WriteHeader(http.StatusOK)
	})}
	epLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return benchResult{}, err
	}
	go endpoint.Serve(epLn)
	defer endpoint.Close()

	if serverURLs == nil {
		serverURLs = []string{serverURL}
	}
	publishURLs := make([]string, len(serverURLs))
	for i, u := range serverURLs {
		publishURLs[i] = u + "/v2/publish/http://" + epLn.Addr().String() + "/noop"
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}}
	stopProgress := reportProgress(&delivered, n, progress)
	st0, err := stats()
	if err != nil {
		return benchResult{}, err
	}
	var shares0 []replicaShare
	if rs != nil {
		if shares0, err = rs.shares(ctx); err != nil {
			return benchResult{}, err
		}
	}
	start := time.Now()
	publishErr := closedLoop(ctx, n, c, func(i int) error {
		body := strconv.Itoa(i) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, publishURLs[i%len(publishURLs)], bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
		req.Header.Set("Content-Type", "text/plain")
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("publish answered %d", resp.StatusCode)
			}
		}
		return err
	})
	publishDur := time.Since(start)
	if publishErr != nil {
		stopProgress()
		return benchResult{}, publishErr
	}
	select {
	case <-allDone:
	case <-ctx.Done():
		stopProgress()
		return benchResult{}, ctx.Err()
	case <-time.After(5 * time.Minute):
		stopProgress()
		return benchResult{}, fmt.Errorf("only %d of %d messages delivered after 5 minutes", delivered.Load(), n)
	}
	deliverDur := time.Since(start)
	stopProgress()
	progress(n, n)

	st, err := stats()
	if err != nil {
		return benchResult{}, err
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	res := benchResult{
		Server:   "inprocess",
		Messages: n, Concurrency: c,
		PublishPerSec:   round1(float64(n) / publishDur.Seconds()),
		DeliveredPerSec: round1(float64(n) / deliverDur.Seconds()),
		LatencyP50Ms:    pct(0.50), LatencyP99Ms: pct(0.99),
		Duplicates:    dups.Load(),
		commitFigures: commitFiguresOf(st0, st),
	}
	if where.external {
		res.Server = "external"
		res.ServerCPUUsPerMessage = round1(float64(st.CPUUs-st0.CPUUs) / float64(n))
	}
	if rs != nil {
		shares, err := rs.shares(ctx)
		if err != nil {
			return benchResult{}, err
		}
		if res.Replicas, err = shareDelta(shares0, shares); err != nil {
			return benchResult{}, err
		}
		res.Projects = where.bs.projects
	}
	return res, nil
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// progressWriter draws a one-line progress bar on w, or nothing when quiet.
func progressWriter(w io.Writer, quiet bool) func(done, total int) {
	if quiet {
		return func(int, int) {}
	}
	return func(done, total int) {
		const width = 40
		filled := done * width / total
		bar := bytes.Repeat([]byte("#"), filled)
		bar = append(bar, bytes.Repeat([]byte("."), width-filled)...)
		fmt.Fprintf(w, "\r[%s] %d/%d delivered", bar, done, total)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// startCPUProfile writes a CPU profile to path until the returned stop is called; an
// empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// printJSONLine writes a benchmark's result as the one JSON line it ends with.
func printJSONLine(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(line))
	return err
}

// closedLoop runs job(0) … job(n-1) on workers goroutines, each taking the next index as
// soon as its previous job returns (a closed loop: load follows the server's speed). It
// stops handing out work at the first error or when ctx ends, and returns that error.
func closedLoop(ctx context.Context, n, workers int, job func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := job(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n)) // the others stop after their current job
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// reportProgress calls progress(done, total) every 200 ms until the returned stop is
// called, so a person at a terminal sees a benchmark move.
func reportProgress(done *atomic.Int64, total int, progress func(done, total int)) (stop func()) {
	quit := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				progress(int(done.Load()), total)
			}
		}
	}()
	return func() { close(quit) }
}
