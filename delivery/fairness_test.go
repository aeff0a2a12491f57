package delivery

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A project whose endpoint hangs holds at most its share of the engine's in-flight
// capacity: another project's deliveries still go out (issue 14, finding 4).
func TestHangingProjectCannotStarveOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxInFlight: 4, DefaultTimeout: waitTimeout})
	_, err := EnsureProject(t.Context(), b.engine.store, Project{ID: "other", CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "")
	require.NoError(t, err)
	hang := make(chan struct{})
	ep := newEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		if r.URL.Path == "/hang" {
			<-hang
		}
		return http.StatusOK, nil, "ok"
	})
	t.Cleanup(func() { closeOnce(hang) }) // before the endpoint's Close, which waits for its requests
	for range 6 {
		b.publish(t, &Message{URL: ep.url("/hang")})
	}
	ep.waitRequests(t, "/hang", 2) // the project's share: half of 4
	id := b.publish(t, &Message{Project: "other", URL: ep.url("/ok")})
	b.waitRecorded(t, id, StateDelivered)
	require.Len(t, ep.requests("/hang"), 2, "the hanging project stays within its share")
	closeOnce(hang)
}
