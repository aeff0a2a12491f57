package live

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
)

// RunState is what a run stream shows of a run at one moment.
type RunState struct {
	// Steps are the run's step views, oldest first, each the data of a `step` event.
	Steps []any
	// Status is the data of a `status` event (and of the final `end`); State names it.
	Status any
	State  string
	// Ended says the run is over: the stream sends `end` and closes.
	Ended bool
}

// ReadRun reads a run's current state; an error before the stream starts is the
// caller's to answer (an unknown run: 404).
type ReadRun func(ctx context.Context) (*RunState, error)

// runID is a run stream's event id: the steps sent and the status shown.
func runID(steps int, state string) string { return strconv.Itoa(steps) + ":" + state }

func parseRunID(id string) (steps int, state string) {
	n, st, ok := strings.Cut(id, ":")
	if !ok {
		return 0, ""
	}
	steps, err := strconv.Atoi(n)
	if err != nil || steps < 0 {
		return 0, ""
	}
	return steps, st
}

// ServeRun streams one run's changes to w: each step as a `step` event, the run's status
// as `status` when it changes, and a final `end`. It starts with the current state (after
// Last-Event-ID's position when the request has one). An error it returns came before the
// stream started (the caller answers it: ErrTooManyStreams, or read's).
func (h *Hub) ServeRun(w http.ResponseWriter, r *http.Request, ref delivery.RunRef, read ReadRun) error {
	s, cancel, err := h.subscribeRun(ref)
	if err != nil {
		return err
	}
	defer cancel()
	ctx := r.Context()
	st, err := read(ctx)
	if err != nil {
		return err
	}
	sw, err := start(w, h.cfg.WriteTimeout)
	if err != nil {
		return nil // the client went away
	}
	rs := &runStream{sw: sw}
	rs.sent, rs.state = parseRunID(r.Header.Get("Last-Event-ID"))
	if rs.sent > len(st.Steps) {
		rs.sent = 0 // not this run's history: start over
	}
	rs.hashes = make([]uint64, rs.sent)
	tick := time.NewTicker(h.cfg.Heartbeat)
	defer tick.Stop()
	for {
		done, err := rs.send(st)
		if done || err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.done:
			return nil
		case <-s.wake:
		case <-tick.C:
			if sw.heartbeat() != nil {
				return nil
			}
			// Re-read now and then: a commit that began before this stream opened
			// was not reported to it.
		}
		if st, err = read(ctx); err != nil {
			return nil // gone (deleted) or the store failed: the client reconnects
		}
	}
}

// runStream is what one run stream has sent.
type runStream struct {
	sw     *writer
	sent   int      // steps sent
	hashes []uint64 // of each sent step's JSON; nil entries after a resume (not resent)
	state  string   // status shown
}

// send writes what changed since the last send; done when the run ended.
func (rs *runStream) send(st *RunState) (done bool, err error) {
	for i, step := range st.Steps {
		b, err := json.Marshal(step)
		if err != nil {
			return false, err
		}
		f := fnv.New64a()
		_, _ = f.Write(b)
		sum := f.Sum64()
		if i < len(rs.hashes) {
			if rs.hashes[i] == sum || rs.hashes[i] == 0 {
				rs.hashes[i] = sum
				continue // sent before (or before the resume)
			}
			rs.hashes[i] = sum // a step whose view changed is sent again
		} else {
			rs.hashes = append(rs.hashes, sum)
			rs.sent = i + 1
		}
		if err := rs.sw.event(runID(rs.sent, rs.state), "step", json.RawMessage(b)); err != nil {
			return false, err
		}
	}
	if st.State != rs.state {
		rs.state = st.State
		if err := rs.sw.event(runID(rs.sent, rs.state), "status", st.Status); err != nil {
			return false, err
		}
	}
	if st.Ended {
		return true, rs.sw.event(runID(rs.sent, rs.state), "end", st.Status)
	}
	return false, nil
}
