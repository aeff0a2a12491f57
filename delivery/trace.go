package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Tracer is told of every HTTP attempt of a workflow run's delivery, for OpenTelemetry
// traces (server/tracing implements it). When Config.Tracer is set, deliveries of runs
// also carry a W3C traceparent header naming the attempt's span, so the endpoint's own
// spans join the run's trace. Nil (the default) costs one nil check per attempt.
// Attempt runs on the attempt's goroutine and must not block.
type Tracer interface {
	Attempt(a AttemptSpan)
}

// AttemptSpan is one HTTP attempt of a run's delivery.
type AttemptSpan struct {
	Project, RunID, Workflow, MessageID, URL string
	Retried                                  int // the attempt's number, from 0
	Start, End                               time.Time
	Status                                   int    // the HTTP status; 0 when there was no answer
	Verdict                                  string // ObsDelivered, ObsRetryable or ObsFinal
	Error                                    string
}

// The ids of a run's trace are derived from its ids, so every replica, every step and the
// exporter agree without storing them.

// TraceID is the trace id of a run.
func TraceID(runID string) [16]byte {
	sum := sha256.Sum256([]byte("duraton-trace\x00" + runID))
	var id [16]byte
	copy(id[:], sum[:])
	return id
}

// RunSpanID is the id of a run's root span.
func RunSpanID(runID string) [8]byte { return spanID("run\x00" + runID) }

// StepSpanID is the id of a run's step span (by the step's id in the run view).
func StepSpanID(runID string, step int) [8]byte {
	return spanID("step\x00" + runID + "\x00" + strconv.Itoa(step))
}

// AttemptSpanID is the id of one attempt's span: what the traceparent of that attempt names.
func AttemptSpanID(messageID string, retried int) [8]byte {
	return spanID("attempt\x00" + messageID + "\x00" + strconv.Itoa(retried))
}

func spanID(s string) [8]byte {
	sum := sha256.Sum256([]byte(s))
	var id [8]byte
	copy(id[:], sum[:])
	if id == [8]byte{} {
		id[7] = 1 // an all-zero span id is invalid
	}
	return id
}

// traceparent is the W3C trace context header of an attempt (sampled).
func traceparent(m *storage.Message) string {
	tid, sid := TraceID(m.RunID), AttemptSpanID(m.ID, m.Retried)
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-01"
}

// traceAttempt tells the tracer of an attempt of a run's delivery.
func (e *Engine) traceAttempt(m *storage.Message, start time.Time, out *Outcome) {
	a := AttemptSpan{Project: m.Project, RunID: m.RunID, MessageID: m.ID, URL: m.URL, Retried: m.Retried,
		Start: start, End: e.now(), Status: out.Response.Status, Verdict: verdictLabel(out.Verdict), Error: out.Response.Error}
	if v := m.Header[wire.HeaderDuratonWorkflow]; len(v) == 1 {
		a.Workflow = v[0]
	}
	e.cfg.Tracer.Attempt(a)
}
