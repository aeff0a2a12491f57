package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// benchFlowResult is the JSON line `duraton bench flow` ends with.
type benchFlowResult struct {
	BaselineDispatchPerSec float64 `json:"baseline_dispatch_per_sec"`
	Keys                   int     `json:"keys"`
	KeysDispatchPerSec     float64 `json:"keys_dispatch_per_sec"`
	KeysLossPct            float64 `json:"keys_loss_pct"`
	Queued                 int     `json:"queued"`
	QueuedDispatchPerSec   float64 `json:"queued_dispatch_per_sec"`
	QueuedLossPct          float64 `json:"queued_loss_pct"`
	HeapBytesPerQueued     float64 `json:"heap_bytes_per_queued"`
	RSSBytesPerQueued      float64 `json:"rss_bytes_per_queued"`
	WakeP50Ms              float64 `json:"wake_p50_ms"`
	WakeP99Ms              float64 `json:"wake_p99_ms"`
	LoadedWakeP50Ms        float64 `json:"loaded_wake_p50_ms"`
	LoadedWakeP99Ms        float64 `json:"loaded_wake_p99_ms"`
	SaturatedWakeP50Ms     float64 `json:"saturated_wake_p50_ms"`
	SaturatedWakeP99Ms     float64 `json:"saturated_wake_p99_ms"`
}

func runBenchFlow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench flow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.Int("keys", 100_000, "keys of parallelism 1 in the many-keys scenario (2 deliveries each)")
	queued := fs.Int("queued", 1_000_000, "deliveries queued on 4 keys in the deep-queue scenario")
	sample := fs.Int("sample", 50_000, "deliveries timed in the baseline and deep-queue scenarios")
	jsonOnly := fs.Bool("json", false, "print only the JSON result line")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *keys < 1 || *queued < *sample || *sample < 100 {
		return errors.New("want --keys ≥ 1, --sample ≥ 100 and --queued ≥ --sample")
	}
	say := func(format string, a ...any) {
		if !*jsonOnly {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	var res benchFlowResult
	var err error

	say("baseline: %d deliveries on 4 keys (parallelism 64), nothing else queued", *sample)
	if res.BaselineDispatchPerSec, _, err = flowScenario(ctx, 4, *sample, 64, *sample, 0, nil); err != nil {
		return err
	}
	say("  %.0f dispatched/s", res.BaselineDispatchPerSec)

	say("many keys: %d keys × parallelism 1, 2 deliveries each", *keys)
	res.Keys = *keys
	if res.KeysDispatchPerSec, _, err = flowScenario(ctx, *keys, 2**keys, 1, 2**keys, 0, nil); err != nil {
		return err
	}
	res.KeysLossPct = lossPct(res.BaselineDispatchPerSec, res.KeysDispatchPerSec)
	say("  %.0f dispatched/s (%.1f %% loss)", res.KeysDispatchPerSec, res.KeysLossPct)

	say("deep queue: %d deliveries parked on 4 keys (parallelism 64), then %d timed", *queued, *sample)
	res.Queued = *queued
	mem := &memProbe{}
	var wake []time.Duration
	if res.QueuedDispatchPerSec, wake, err = flowScenario(ctx, 4, *queued, 64, *sample, 0, mem); err != nil {
		return err
	}
	res.SaturatedWakeP50Ms, res.SaturatedWakeP99Ms = percentileMs(wake, 0.50), percentileMs(wake, 0.99)
	res.QueuedLossPct = lossPct(res.BaselineDispatchPerSec, res.QueuedDispatchPerSec)
	res.HeapBytesPerQueued = round1(float64(mem.heap) / float64(*queued))
	res.RSSBytesPerQueued = round1(float64(mem.rss) / float64(*queued))
	say("  %.0f dispatched/s (%.1f %% loss), %.0f heap bytes and %.0f RSS bytes per queued delivery; at saturation wake p50 %.3f ms p99 %.3f ms",
		res.QueuedDispatchPerSec, res.QueuedLossPct, res.HeapBytesPerQueued, res.RSSBytesPerQueued, res.SaturatedWakeP50Ms, res.SaturatedWakeP99Ms)

	say("wake under load: 200 keys × parallelism 1, 20 deliveries each, 5 ms per request (the engine is near its commit limit)")
	if _, wake, err = flowScenario(ctx, 200, 4000, 1, 4000, 5*time.Millisecond, nil); err != nil {
		return err
	}
	res.LoadedWakeP50Ms, res.LoadedWakeP99Ms = percentileMs(wake, 0.50), percentileMs(wake, 0.99)
	say("  wake p50 %.3f ms p99 %.3f ms (%d wakes)", res.LoadedWakeP50Ms, res.LoadedWakeP99Ms, len(wake))

	say("wake at moderate load: 20 keys × parallelism 1, 100 deliveries each, 5 ms per request")
	if _, wake, err = flowScenario(ctx, 20, 2000, 1, 2000, 5*time.Millisecond, nil); err != nil {
		return err
	}
	res.WakeP50Ms, res.WakeP99Ms = percentileMs(wake, 0.50), percentileMs(wake, 0.99)
	say("  wake p50 %.3f ms p99 %.3f ms (%d wakes)", res.WakeP50Ms, res.WakeP99Ms, len(wake))

	return printJSONLine(stdout, res)
}

func lossPct(base, got float64) float64 { return round1(max(0, (base-got)/base*100)) }

func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
}

// memProbe, when given, makes a scenario park every delivery first (keys paused) and
// records the memory growth that parking caused.
type memProbe struct{ heap, rss int64 }

// flowScenario runs an engine on a fresh store whose attempts go to an in-process
// endpoint that answers at once, so what is timed is the engine: admission, waitlists,
// attempts and the durable outcome of each. It publishes n deliveries over `keys` keys of
// the given parallelism and times the first `timed` starts. It returns starts per second
// and the wake latencies (a slot's release → the waiting delivery it admitted being sent).
// serviceTime makes the endpoint take that long per request.
func flowScenario(ctx context.Context, keys, n, parallelism, timed int, serviceTime time.Duration, mem *memProbe) (float64, []time.Duration, error) {
	dir, err := os.MkdirTemp("", "duraton-bench-flow-")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir)
	store, err := storage.Open(dataFile(dir), storage.Options{})
	if err != nil {
		return 0, nil, err
	}
	defer store.Close()
	if _, _, err := ensureDefaultProject(ctx, modeDev, serverFlags{}, store); err != nil {
		return 0, nil, err
	}

	ep := newBenchEndpoint(timed)
	ep.serviceTime = serviceTime
	engine, err := delivery.New(delivery.Config{
		// One project: its share of the engine is all of it, and it may hold every key.
		Transport: ep, Logger: discardLogger(), MaxInFlight: 1024, ProjectShare: 1024, MaxFlowKeys: keys + 16,
		Hooks: delivery.Hooks{Woken: ep.woken},
	}, store)
	if err != nil {
		return 0, nil, err
	}
	keyName := func(i int) string { return "k" + strconv.Itoa(i) }
	if mem != nil {
		for i := 0; i < keys; i++ {
			if err := engine.SetFlowKeyPaused(ctx, devProject, keyName(i), true); err != nil {
				return 0, nil, err
			}
		}
	}
	if err := engine.Start(ctx); err != nil {
		return 0, nil, err
	}
	defer engine.Stop()

	// Publish in batches; with paused keys everything parks, else the run starts at once.
	before := readMem()
	const batch = 1000
	for i := 0; i < n; i += batch {
		msgs := make([]*delivery.Message, 0, batch)
		for j := i; j < min(n, i+batch); j++ {
			key := keyName(j % keys)
			msgs = append(msgs, &delivery.Message{Project: devProject, URL: "http://bench.invalid/" + key, Method: "POST",
				FlowControl: &flowctl.Config{Key: key, Parallelism: parallelism, Period: time.Second}})
		}
		if _, err := engine.Publish(ctx, msgs); err != nil {
			return 0, nil, err
		}
	}
	if mem != nil {
		// Wait until the dispatcher parked everything, then measure what that cost.
		deadline := time.Now().Add(5 * time.Minute)
		for parked(engine, keys, keyName) < n {
			if time.Now().After(deadline) {
				return 0, nil, fmt.Errorf("only %d of %d deliveries parked after 5 minutes", parked(engine, keys, keyName), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		after := readMem()
		mem.heap, mem.rss = after.heap-before.heap, after.rss-before.rss
		ep.reset()
		for i := 0; i < keys; i++ {
			if err := engine.SetFlowKeyPaused(ctx, devProject, keyName(i), false); err != nil {
				return 0, nil, err
			}
		}
	}
	select {
	case <-ep.done:
	case <-time.After(10 * time.Minute):
		return 0, nil, fmt.Errorf("only %d of %d timed deliveries started after 10 minutes", ep.starts.Load(), timed)
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	return round1(float64(timed) / ep.elapsed().Seconds()), ep.wakeLatencies(), nil
}

func parked(e *delivery.Engine, keys int, name func(int) string) int {
	total := 0
	for i := 0; i < keys; i++ {
		total += e.FlowKey(devProject, name(i)).WaitListSize
	}
	return total
}

type memSample struct{ heap, rss int64 }

func readMem() memSample {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var rss int64
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return memSample{heap: int64(ms.HeapAlloc), rss: rss}
}

// benchEndpoint answers every attempt at once and measures starts and wake latency.
type benchEndpoint struct {
	want        int64
	serviceTime time.Duration // how long each request takes
	starts      atomic.Int64
	done        chan struct{}

	mu    sync.Mutex
	first time.Time
	last  time.Time
	wake  []time.Duration
}

func newBenchEndpoint(want int) *benchEndpoint {
	return &benchEndpoint{want: int64(want), done: make(chan struct{})}
}

func (b *benchEndpoint) reset() {
	b.mu.Lock()
	b.first, b.wake = time.Time{}, nil
	b.mu.Unlock()
	b.starts.Store(0)
}

// woken records a wake latency: a slot's release → the next delivery being sent.
func (b *benchEndpoint) woken(_, _ string, d time.Duration) {
	b.mu.Lock()
	b.wake = append(b.wake, d)
	b.mu.Unlock()
}

func (b *benchEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	now := time.Now()
	b.mu.Lock()
	if b.first.IsZero() {
		b.first = now
	}
	b.mu.Unlock()
	if n := b.starts.Add(1); n == b.want {
		b.mu.Lock()
		b.last = now
		b.mu.Unlock()
		close(b.done)
	}
	if b.serviceTime > 0 {
		time.Sleep(b.serviceTime)
	}
	return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func (b *benchEndpoint) elapsed() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last.Sub(b.first)
}

func (b *benchEndpoint) wakeLatencies() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.wake...)
}
