package live

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

func refs(project string, ids ...string) []delivery.RunRef {
	out := make([]delivery.RunRef, len(ids))
	for i, id := range ids {
		out[i] = delivery.RunRef{Project: project, ID: id}
	}
	return out
}

// A project stream that falls more than Buffer changes behind is dropped (its queue
// stops growing); the engine is told to record changes only while a stream is open.
func TestSlowProjectStreamIsDroppedNotGrown(t *testing.T) {
	h := New(Config{Buffer: 2})
	require.False(t, h.Watching())
	s, cancel, _, err := h.subscribeProject("p", "")
	require.NoError(t, err)
	require.True(t, h.Watching())
	h.RunsChanged(refs("p", "a", "b", "c", "d"))
	h.RunsChanged(refs("other", "x"))
	changes, dropped := s.take()
	require.True(t, dropped)
	require.Len(t, changes, 2, "the queue stopped at its bound")
	cancel()
	require.False(t, h.Watching())
}

// Resuming a project stream replays the remembered changes after the id; an id from
// before a time nobody watched, or older than the ring, starts with a reset.
func TestProjectStreamResume(t *testing.T) {
	h := New(Config{Ring: 3})
	_, keep, _, err := h.subscribeProject("p", "")
	require.NoError(t, err)
	h.RunsChanged(refs("p", "a"))
	h.mu.Lock()
	after := h.position()
	h.mu.Unlock()
	h.RunsChanged(refs("p", "b"))
	h.RunsChanged(refs("q", "z"))

	s, cancel, resumed, err := h.subscribeProject("p", after)
	require.NoError(t, err)
	require.True(t, resumed)
	changes, _ := s.take()
	require.Len(t, changes, 1)
	require.Equal(t, "b", changes[0].ref.ID, "only this project's changes after the id")
	cancel()

	h.RunsChanged(refs("p", "c", "d", "e"))
	_, cancel, resumed, err = h.subscribeProject("p", after)
	require.NoError(t, err)
	require.False(t, resumed, "the ring no longer holds the changes after the id")
	cancel()

	keep() // nobody watches: later commits go unheard
	_, cancel, resumed, err = h.subscribeProject("p", h.formatID(h.seq))
	require.NoError(t, err)
	require.False(t, resumed, "an id from before an unwatched time cannot resume")
	cancel()

	_, cancel, resumed, err = h.subscribeProject("p", "otherprocess.1")
	require.NoError(t, err)
	require.False(t, resumed)
	cancel()
}

func TestMaxStreams(t *testing.T) {
	h := New(Config{MaxStreams: 1})
	_, cancel, err := h.subscribeRun(delivery.RunRef{Project: "p", ID: "a"})
	require.NoError(t, err)
	_, _, _, err = h.subscribeProject("p", "")
	require.ErrorIs(t, err, ErrTooManyStreams)
	cancel()
	_, _, _, err = h.subscribeProject("p", "")
	require.NoError(t, err)
}
