package live

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// ReadStatus reads one run's status view for a project stream; show is false for a run
// the stream does not show (another workflow's, not a native run, deleted).
type ReadStatus func(ctx context.Context, runID string) (status any, show bool, err error)

// maxRemembered bounds the runs a project stream remembers the last sent status of (to
// skip a change that left the status as it was).
const maxRemembered = 10_000

// ServeProject streams the status changes of a project's runs: a `run` event with the
// run's status view each time it changes, `reset` when the stream cannot resume from
// Last-Event-ID (reload, then follow). An error it returns came before the stream started.
func (h *Hub) ServeProject(w http.ResponseWriter, r *http.Request, project string, read ReadStatus) error {
	s, cancel, resumed, err := h.subscribeProject(project, r.Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	defer cancel()
	h.mu.Lock()
	pos := h.position()
	h.mu.Unlock()
	sw, err := start(w, h.cfg.WriteTimeout)
	if err != nil {
		return nil
	}
	if r.Header.Get("Last-Event-ID") != "" && !resumed {
		if sw.event(pos, "reset", map[string]string{"reason": "cannot resume from that event id: reload, then follow"}) != nil {
			return nil
		}
	} else if sw.heartbeat() != nil {
		return nil
	}
	ctx := r.Context()
	last := map[string][]byte{}
	tick := time.NewTicker(h.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.done:
			return nil
		case <-tick.C:
			if sw.heartbeat() != nil {
				return nil
			}
			continue
		case <-s.wake:
		}
		changes, dropped := s.take()
		if dropped {
			return nil // fell behind: the client reconnects and resumes from its last id
		}
		if err := h.sendChanges(ctx, sw, changes, last, read); err != nil {
			return nil
		}
	}
}

// sendChanges writes the current status of each run in changes (once per run, with the
// id of its newest change), skipping those whose status view did not change.
func (h *Hub) sendChanges(ctx context.Context, sw *writer, changes []change, last map[string][]byte, read ReadStatus) error {
	newest := make(map[string]uint64, len(changes))
	for _, c := range changes {
		newest[c.ref.ID] = c.seq
	}
	for _, c := range changes {
		if newest[c.ref.ID] != c.seq {
			continue
		}
		v, show, err := read(ctx, c.ref.ID)
		if err != nil {
			return err
		}
		if !show {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if bytes.Equal(last[c.ref.ID], b) {
			continue
		}
		if len(last) >= maxRemembered {
			clear(last)
		}
		last[c.ref.ID] = b
		if err := sw.event(h.formatID(c.seq), "run", json.RawMessage(b)); err != nil {
			return err
		}
	}
	return nil
}
