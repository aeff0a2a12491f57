package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
)

// A due entry's value round-trips every field the scheduler needs, including a start
// gate whose key holds NUL and arbitrary bytes, and entries written before the later
// fields existed decode them as zero.
func TestDueEntryRoundTrip(t *testing.T) {
	full := DueEntry{DueAt: 42, MessageID: "msg_1", Project: "p", Queue: "q", FlowKey: "wf.sync.ab",
		Limits: flowctl.Limits{Parallelism: 2, Rate: 3, Period: 4 * time.Second}, OrderAt: -7,
		Extra:   []ExtraKey{{Key: "wf.sync.cd", Parallelism: 10}, {Key: "k2", Parallelism: 1}},
		ShiftMs: -60000, Gate: &StartGate{Key: "wf\x00throttle\x00user;=é", Limit: 5, PerMs: 60000}}
	for _, e := range []DueEntry{
		full,
		{DueAt: 1, MessageID: "msg_2", Project: "p", Limits: flowctl.Limits{Period: time.Second}},
		{DueAt: 1, MessageID: "msg_3", Project: "p", ShiftMs: 5, Limits: flowctl.Limits{Period: time.Second}},
	} {
		got, err := decodeDue(e.Key(), e.value())
		require.NoError(t, err)
		require.Equal(t, e, got)
	}
	old, err := decodeDue(full.Key(), []byte("p\x00q\x00wf.sync.ab\x002\x003\x004000\x00-7\x00false"))
	require.NoError(t, err)
	require.Nil(t, old.Gate)
	require.Empty(t, old.Extra)
	_, err = decodeDue(full.Key(), []byte("p\x00\x00k\x000\x000\x001000\x000\x00false\x00bad\x000"))
	require.ErrorIs(t, err, ErrCorrupt)
}
