// Package tracing exports workflow runs as OpenTelemetry traces over OTLP/HTTP, when
// `--otlp-endpoint` is set. A run is one trace whose id is derived from the run id
// (delivery.TraceID), so every replica and every step agree without storing it: a root
// span for the run, a span per step, and a span per HTTP attempt of its deliveries,
// whose id is the one the attempt's traceparent header names (the endpoint's spans join
// as its children).
//
// Attempt spans are exported as they end (the engine's delivery.Tracer); the run and
// step spans when the run ends (the Exporter is a delivery.RunWatcher and reads the run's
// view then), so a run still going shows its attempts only. Runs ending faster than the
// exporter reads them are queued up to Config.Queue; beyond that a run's spans are
// dropped and counted in the log, never allowed to grow memory or block the engine.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
)

// RunReader reads a native run's view (native.Service).
type RunReader interface {
	Run(ctx context.Context, project, id string) (*native.RunView, error)
}

// Config configures the Exporter.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces; a URL
	// without a path gets /v1/traces). Required.
	Endpoint string
	// Queue caps the changed runs waiting to be read. Default 4,096.
	Queue int
	// Logger receives export errors. Default slog.Default().
	Logger *slog.Logger
}

// Exporter exports runs as traces.
type Exporter struct {
	cfg    Config
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	queue  chan delivery.RunRef
	done   chan struct{}
	wg     sync.WaitGroup
	log    *slog.Logger
	runs   atomic.Pointer[RunReader]

	mu       sync.Mutex
	exported map[delivery.RunRef]struct{} // ended runs sent, cleared when large
	dropped  int
}

var (
	_ delivery.Tracer     = (*Exporter)(nil)
	_ delivery.RunWatcher = (*Exporter)(nil)
)

// maxExported bounds the memory of ended runs already exported.
const maxExported = 100_000

// New builds an exporter and starts its reader; Close flushes and stops it.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("tracing: Config.Endpoint is required")
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: --otlp-endpoint: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "duraton"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	e := &Exporter{cfg: cfg, tp: tp, tracer: tp.Tracer("github.com/duraton/duraton"),
		queue: make(chan delivery.RunRef, cfg.Queue), done: make(chan struct{}),
		log: cfg.Logger.With("component", "tracing"), exported: map[delivery.RunRef]struct{}{}}
	e.wg.Add(1)
	go e.read()
	return e, nil
}

// ReadRuns sets what reads a run's view when it ends (the native unit, built after the
// engine this exporter is given to). Until it is set, ended runs export no run span.
func (e *Exporter) ReadRuns(r RunReader) { e.runs.Store(&r) }

// Close stops reading runs and flushes the spans made so far, until ctx ends.
func (e *Exporter) Close(ctx context.Context) error {
	close(e.done)
	e.wg.Wait()
	return e.tp.Shutdown(ctx)
}

// Flush exports the spans made so far (tests).
func (e *Exporter) Flush(ctx context.Context) error { return e.tp.ForceFlush(ctx) }

// Watching is always true: every run's end is exported.
func (e *Exporter) Watching() bool { return true }

// RunsChanged queues the changed runs for reading; beyond the queue they are dropped.
func (e *Exporter) RunsChanged(refs []delivery.RunRef) {
	for _, r := range refs {
		select {
		case e.queue <- r:
		default:
			e.mu.Lock()
			e.dropped++
			n := e.dropped
			e.mu.Unlock()
			if n&(n-1) == 0 { // 1, 2, 4, ...: said, not flooded
				e.log.Warn("trace export queue full: runs dropped", "dropped", n)
			}
		}
	}
}

func (e *Exporter) read() {
	defer e.wg.Done()
	for {
		select {
		case <-e.done:
			return
		case ref := <-e.queue:
			e.exportRun(ref)
		}
	}
}

// exportRun exports an ended run's root and step spans, once.
func (e *Exporter) exportRun(ref delivery.RunRef) {
	e.mu.Lock()
	_, seen := e.exported[ref]
	e.mu.Unlock()
	if seen {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rr := e.runs.Load()
	if rr == nil {
		return
	}
	v, err := (*rr).Run(ctx, ref.Project, ref.ID)
	if err != nil || !ended(v.Status) {
		return // not a native run, deleted, or going on
	}
	e.mu.Lock()
	if len(e.exported) >= maxExported {
		clear(e.exported)
	}
	e.exported[ref] = struct{}{}
	e.mu.Unlock()

	runAttrs := []attribute.KeyValue{attribute.String("duraton.run_id", v.RunID), attribute.String("duraton.workflow", v.Workflow),
		attribute.String("duraton.app", v.App), attribute.String("duraton.outcome", v.Status), attribute.String("duraton.project", ref.Project)}
	rootCtx := withIDs(context.Background(), delivery.TraceID(v.RunID), delivery.RunSpanID(v.RunID))
	rootCtx, root := e.tracer.Start(rootCtx, "run "+v.Workflow, trace.WithTimestamp(time.UnixMilli(v.CreatedAt)),
		trace.WithAttributes(runAttrs...), trace.WithSpanKind(trace.SpanKindInternal))
	prev := v.StartedAt
	if prev == 0 {
		prev = v.CreatedAt
	}
	for _, s := range v.Steps {
		start := prev
		if start > s.EndedAt {
			start = s.EndedAt
		}
		sctx := withIDs(rootCtx, delivery.TraceID(v.RunID), delivery.StepSpanID(v.RunID, s.ID))
		_, span := e.tracer.Start(sctx, "step "+s.Name, trace.WithTimestamp(time.UnixMilli(start)),
			trace.WithAttributes(attribute.String("duraton.run_id", v.RunID), attribute.String("duraton.workflow", v.Workflow),
				attribute.String("duraton.step.type", s.Type), attribute.Int("duraton.step.id", s.ID), attribute.String("duraton.outcome", s.Status)))
		if s.Status == native.StatusFailed {
			span.SetStatus(codes.Error, "step failed")
		}
		span.End(trace.WithTimestamp(time.UnixMilli(s.EndedAt)))
		prev = s.EndedAt
	}
	if v.Status == native.StatusFailed {
		root.SetStatus(codes.Error, "run failed")
	}
	end := v.EndedAt
	if end == 0 {
		end = prev
	}
	root.End(trace.WithTimestamp(time.UnixMilli(end)))
}

// Attempt exports one attempt's span, a child of its run's root span.
func (e *Exporter) Attempt(a delivery.AttemptSpan) {
	tid := delivery.TraceID(a.RunID)
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: delivery.RunSpanID(a.RunID),
		TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	ctx = withIDs(ctx, tid, delivery.AttemptSpanID(a.MessageID, a.Retried))
	_, span := e.tracer.Start(ctx, "attempt", trace.WithTimestamp(a.Start), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("duraton.run_id", a.RunID), attribute.String("duraton.workflow", a.Workflow),
			attribute.String("duraton.message_id", a.MessageID), attribute.Int("duraton.retried", a.Retried),
			attribute.String("duraton.outcome", a.Verdict), attribute.Int("http.response.status_code", a.Status),
			attribute.String("url.full", a.URL)))
	if a.Verdict != delivery.ObsDelivered {
		span.SetStatus(codes.Error, a.Error)
	}
	span.End(trace.WithTimestamp(a.End))
}

func ended(status string) bool {
	return status == native.StatusSucceeded || status == native.StatusFailed || status == native.StatusCancelled
}

// idGenerator gives a span the ids its context carries (withIDs): ids derived from the
// run, not random ones.
type idGenerator struct{}

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, tid [16]byte, sid [8]byte) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{trace: tid, span: sid})
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.trace, v.span
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	v, _ := ctx.Value(idsKey{}).(ids)
	return v.span
}
