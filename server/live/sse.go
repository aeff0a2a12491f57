package live

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// writer writes Server-Sent Events, each under its own write deadline (so a client that
// stops reading is dropped, and the server's WriteTimeout does not end a long stream).
type writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// start sends the stream's headers and the client's reconnection delay.
func start(w http.ResponseWriter, timeout time.Duration) (*writer, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	sw := &writer{w: w, rc: http.NewResponseController(w), timeout: timeout}
	return sw, sw.raw("retry: 2000\n\n")
}

// event writes one event; data is marshalled as one line of JSON.
func (sw *writer) event(id, name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("live: %s event: %w", name, err)
	}
	return sw.raw("id: " + id + "\nevent: " + name + "\ndata: " + string(b) + "\n\n")
}

// heartbeat writes a comment line.
func (sw *writer) heartbeat() error { return sw.raw(": ping\n\n") }

func (sw *writer) raw(s string) error {
	if err := sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)); err != nil && err != http.ErrNotSupported {
		return err
	}
	if _, err := sw.w.Write([]byte(s)); err != nil {
		return err
	}
	return sw.rc.Flush()
}
