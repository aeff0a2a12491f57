package delivery

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The dispatcher's loop sleeps until its next wake-up; a change made elsewhere starts
// what is due on the caller's goroutine, and wakes the loop only for a wake-up earlier
// than the one it sleeps until. These check that no delivery waits for a later one.

// TestEarlierDeliveryWakesASleepingDispatcher: with a delivery due in an hour, the loop
// sleeps for an hour; one published for in five seconds is sent at five seconds, and
// one published for now at once.
func TestEarlierDeliveryWakesASleepingDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{})
		defer store.Close()
		defer e.Stop()
		publish := func(path string, after time.Duration) {
			_, err := e.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: "http://x.test/" + path, Method: "POST",
				NotBefore: time.Now().Add(after).UnixMilli()}}})
			require.NoError(t, err)
		}
		start := time.Now()
		publish("hour", time.Hour)
		synctest.Wait() // the loop sleeps until the hour
		publish("five", 5*time.Second)
		publish("now", 0)
		synctest.Wait()
		require.Len(t, ep.startsOf("/now"), 1, "due now: started by the publish itself")
		require.Empty(t, ep.startsOf("/five"))

		time.Sleep(5 * time.Second)
		synctest.Wait()
		five := ep.startsOf("/five")
		require.Len(t, five, 1, "the five-second delivery woke the loop before its hour")
		require.Equal(t, 5*time.Second, five[0].Sub(start).Truncate(time.Second))
		require.Empty(t, ep.startsOf("/hour"))

		time.Sleep(time.Hour)
		synctest.Wait()
		require.Len(t, ep.startsOf("/hour"), 1)
	})
}

// TestFinishedAttemptAsksForTheNextPage: with a small ready list and few slots, the
// attempts that finish start what the list holds and, when it runs dry while storage
// holds more, wake the loop to read the next page: every delivery is sent at once, none
// waits for the loop's idle wake-up a minute later.
func TestFinishedAttemptAsksForTheNextPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newFakeEndpoint()
		e, store := bubbleEngine(t, ep, Config{BufferSize: 8, MaxInFlight: 2})
		defer store.Close()
		defer e.Stop()
		start := time.Now()
		var pubs []Publication
		for range 40 {
			pubs = append(pubs, Publication{Message: &Message{Project: testProject, URL: "http://x.test/p", Method: "POST"}})
		}
		_, err := e.PublishAll(t.Context(), pubs)
		require.NoError(t, err)
		synctest.Wait()
		sent := ep.startsOf("/p")
		require.Len(t, sent, 40)
		require.Equal(t, start, sent[len(sent)-1], "the last was sent without waiting on the clock")
	})
}
