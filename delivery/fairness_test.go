package delivery

import (
	"net/http"
	"testing"
	"time"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/flowctl"
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

// A project holds at most MaxFlowKeys flow-control keys: a publication that would add one
// more is refused, and so is a pause that would; a key that went idle frees its place
// (issue 14, finding 9).
func TestFlowKeysPerProjectAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxFlowKeys: 2})
	hold := make(chan struct{})
	ep := newEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		if r.URL.Path == "/hold" {
			<-hold
		}
		return http.StatusOK, nil, "ok"
	})
	t.Cleanup(func() { closeOnce(hold) })
	keyed := func(key, path string) error {
		_, err := b.engine.Publish(t.Context(), []*Message{{Project: testProject, URL: ep.url(path), Method: "POST",
			FlowControl: &flowctl.Config{Key: key, Parallelism: 1, Period: time.Second}}})
		return err
	}
	require.NoError(t, keyed("k1", "/hold"))
	require.NoError(t, keyed("k2", "/hold"))
	ep.waitRequests(t, "/hold", 2)
	require.ErrorIs(t, keyed("k3", "/ok"), ErrFlowKeyLimit)
	require.NoError(t, keyed("k1", "/ok"), "a key the project holds takes more messages")
	require.ErrorIs(t, b.engine.SetFlowKeyPaused(t.Context(), testProject, "k4", true), ErrFlowKeyLimit)

	closeOnce(hold) // k1 and k2 finish; with no rate and no setting their keys go idle
	ep.waitRequests(t, "/ok", 1)
	deliverytest.Eventually(t, waitTimeout, "keys released", func() bool { return keyed("k3", "/ok") == nil })
}
