package sched

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// keyedEntry is a due entry of key "k" (parallelism 1) of project "p", due at ms, whose
// run orders at orderAt.
func keyedEntry(id string, ms, orderAt int64) storage.DueEntry {
	return storage.DueEntry{DueAt: at(ms).UnixNano(), MessageID: id, Project: "p", FlowKey: "k",
		Limits: flowctl.Limits{Parallelism: 1}, OrderAt: orderAt}
}

// startedWithWaiting builds a scheduler whose key "k" has a in flight and b waiting for
// its slot, and returns it with a's start.
func startedWithWaiting(t *testing.T, a, b storage.DueEntry) (*Scheduler, Start) {
	t.Helper()
	s, err := New(Config{})
	require.NoError(t, err)
	dec := s.Next(at(10))
	require.NotNil(t, dec.Page, "a new scheduler reads the due index first")
	require.NoError(t, s.Paged(*dec.Page, []storage.DueEntry{a, b}, false))
	dec = s.Next(at(10))
	require.Equal(t, []string{a.MessageID}, startedIDs(dec.Starts), "parallelism 1: only a starts")
	require.True(t, s.holds(b), "b waits in the key's waitlist")
	return s, dec.Starts[0]
}

func startedIDs(starts []Start) []string {
	ids := make([]string, 0, len(starts))
	for _, st := range starts {
		ids = append(ids, st.Entry.MessageID)
	}
	return ids
}

// TestFinishWeighsDueFollowUpAgainstWaiting: a follow-up that is due and goes through a
// waitlist joins it before the finished delivery's slot is released, so the freed slot
// goes to whichever of it and the deliveries already waiting lessWait puts first (older
// runs first), as if it had been published while the delivery was in flight. Follow-ups
// that cannot take the slot now (a retry of the finished message itself, one not yet
// due) leave it to the waiting delivery.
func TestFinishWeighsDueFollowUpAgainstWaiting(t *testing.T) {
	t.Parallel()
	const now = 20 // ms
	// a and its follow-up belong to the older run (order 100); b to a newer one (200).
	// Ids alone would put b first ("m2" < "m3"): only the run's order can put a2 first.
	a, b := keyedEntry("m1", 0, 100), keyedEntry("m2", 1, 200)
	tests := []struct {
		name   string
		follow storage.DueEntry
		first  string // what the release starts
	}{
		{"older run's next step goes first", keyedEntry("m3", now, 100), "m3"},
		{"newer run's next step waits behind b", keyedEntry("m3", now, 300), "m2"},
		{"a retry of the finished message goes behind b", keyedEntry("m1", now, 100), "m2"},
		{"a follow-up not yet due leaves the slot to b", keyedEntry("m3", now+5, 100), "m2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, stA := startedWithWaiting(t, a, b)
			starts := s.Finish(stA, []storage.DueEntry{tt.follow}, at(now))
			require.Equal(t, []string{tt.first}, startedIDs(starts))

			// The other one starts once the slot is free again, and only then.
			other := "m2"
			if tt.first == "m2" {
				other = tt.follow.MessageID
			}
			dec := s.Next(at(now + 10))
			require.Empty(t, dec.Starts, "the key's one slot is held by %s", tt.first)
			starts = s.Finish(starts[0], nil, at(now+10))
			starts = append(starts, s.Next(at(now+10)).Starts...)
			require.Equal(t, []string{other}, startedIDs(starts))
		})
	}
}

// TestFinishFollowUpStartsWhenNothingWaits: with the key free after the release and
// nobody waiting, a due follow-up starts from Finish itself, exactly once.
func TestFinishFollowUpStartsWhenNothingWaits(t *testing.T) {
	t.Parallel()
	s, err := New(Config{})
	require.NoError(t, err)
	dec := s.Next(at(10))
	require.NoError(t, s.Paged(*dec.Page, []storage.DueEntry{keyedEntry("m1", 0, 100)}, false))
	dec = s.Next(at(10))
	require.Len(t, dec.Starts, 1)

	starts := s.Finish(dec.Starts[0], []storage.DueEntry{keyedEntry("m3", 20, 100)}, at(20))
	require.Equal(t, []string{"m3"}, startedIDs(starts))
	require.Empty(t, s.Next(at(20)).Starts, "m3 is not started a second time from the ready list")
	require.Empty(t, s.Finish(starts[0], nil, at(30)))
	require.Empty(t, s.Next(at(30)).Starts)
}
