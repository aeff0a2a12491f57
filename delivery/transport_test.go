package delivery

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An endpoint that closes its idle keep-alive connections (Node does after 5 s) must not
// cost a delivery an attempt: the transport notices the close before it reuses the
// connection, as net/http's reader goroutine would have.
func TestDeliveryAfterEndpointClosedIdleConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var mu sync.Mutex
	states := map[net.Conn][]http.ConnState{}
	closed := make(chan struct{}, 16)
	got := make(chan string, 16)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		states[c] = append(states[c], s)
		mu.Unlock()
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	first := b.publish(t, &Message{URL: srv.URL + "/first"})
	b.waitRecorded(t, first, StateDelivered)
	require.Equal(t, "/first", <-got)

	// The endpoint closes the connection that is now idle in the engine's pool, and keeps
	// serving new ones.
	srv.Config.SetKeepAlivesEnabled(false)
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("the endpoint did not close its idle connection")
	}
	srv.Config.SetKeepAlivesEnabled(true)

	second := b.publish(t, &Message{URL: srv.URL + "/second"}) // Retries: 0, one attempt
	events := b.waitRecorded(t, second, "")
	require.Equal(t, StateDelivered, events[0].state, "the only attempt was delivered")
	require.Equal(t, "/second", <-got)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, states, 2, "the second delivery went over a new connection")
}
