package native

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/flowctl/expr"
)

// TestPriorityRunIsSecondsClamped: priority.run is evaluated per event as seconds,
// clamped to ±600 s; no value is no shift; shiftMs still applies as written.
func TestPriorityRunIsSecondsClamped(t *testing.T) {
	t.Parallel()
	s := &Service{exprs: expr.NewCache(0)}
	d := &Workflow{FlowControl: flowctl.Controls{Priority: &flowctl.Priority{Run: `event.data.vip ? event.data.boost : -30`}}}
	ev := func(data string) *keyEvent {
		return newKeyEvent(payloadEvent{ID: "evt_1", Name: "e", Data: json.RawMessage(data), Ts: 1})
	}
	for data, want := range map[string]int64{
		`{"vip": true, "boost": 45}`:    45_000,
		`{"vip": true, "boost": 9000}`:  600_000,
		`{"vip": true, "boost": -9000}`: -600_000,
		`{"vip": false}`:                -30_000,
		`{"vip": true, "boost": 2.5}`:   0, // not an integer: no shift
		`{}`:                            0, // no value: no shift
	} {
		require.Equal(t, want, s.priorityShiftMs(d, ev(data)), data)
	}
	d.FlowControl.Priority = &flowctl.Priority{ShiftMs: 1234}
	require.Equal(t, int64(1234), s.priorityShiftMs(d, ev(`{}`)))
}
