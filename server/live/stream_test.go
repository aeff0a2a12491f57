package live

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

// A stream outlives the HTTP server's WriteTimeout (each write sets its own deadline)
// and ReadTimeout, and still brings changes after them.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	hub := New(Config{Heartbeat: 100 * time.Millisecond})
	ref := delivery.RunRef{Project: "p", ID: "wfr_1"}
	state := make(chan string, 1)
	state <- "running"
	current := "running"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := hub.ServeRun(w, r, ref, func(context.Context) (*RunState, error) {
			select {
			case current = <-state:
			default:
			}
			return &RunState{Status: map[string]string{"status": current}, State: current, Ended: current == "succeeded"}, nil
		})
		require.NoError(t, err)
	}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	time.Sleep(700 * time.Millisecond) // past both timeouts
	state <- "succeeded"
	hub.RunsChanged([]delivery.RunRef{ref})
	var got []string
	for l := range lines {
		if strings.HasPrefix(l, "event: ") {
			got = append(got, l[7:])
		}
	}
	require.Equal(t, []string{"status", "status", "end"}, got, "the stream lived past the timeouts and ended with the run")
}
