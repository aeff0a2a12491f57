package native

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
)

// TestBufferPipelineProperty: random events, keys, arrival times and flusher firings
// (late, early or not at all until the end) through a debounce and a batch workflow.
// Batch: every event is in exactly one run, runs hold one key's events in receive order,
// at most maxSize of them, all received within timeoutMs of the first. Debounce: the runs
// are exactly the last events of the bursts the model computes (per key, a burst ends
// when no event came before its deadline), whenever the flusher happened to run.
func TestBufferPipelineProperty(t *testing.T) {
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := open(t, t.TempDir(), ep, c)
	defer n.close(t)
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		maxSize := rapid.IntRange(2, 5).Draw(rt, "maxSize")
		batchMs := rapid.Int64Range(1000, 5000).Draw(rt, "batchMs")
		periodMs := rapid.Int64Range(1000, 5000).Draw(rt, "periodMs")
		capMs := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(periodMs, 3*periodMs)).Draw(rt, "timeoutMs")
		event := fmt.Sprintf("e%d", round)
		deb := fmt.Sprintf(`"debounce": {"periodMs": %d, "key": "k"}`, periodMs)
		if capMs > 0 {
			deb = fmt.Sprintf(`"debounce": {"periodMs": %d, "key": "k", "timeoutMs": %d}`, periodMs, capMs)
		}
		n.register(rt, fmt.Sprintf("app%d", round), fmt.Sprintf(`{"workflows": [
			{"name": "bat%[1]d", "url": "http://x.test/bat%[1]d", "triggers": [{"event": %[2]q}], "batch": {"maxSize": %[3]d, "timeoutMs": %[4]d, "key": "k"}},
			{"name": "deb%[1]d", "url": "http://x.test/deb%[1]d", "triggers": [{"event": %[2]q}], %[5]s}]}`,
			round, event, maxSize, batchMs, deb))

		type sent struct {
			id, key string
			ts      int64
		}
		var all []sent
		count := rapid.IntRange(1, 20).Draw(rt, "events")
		for i := range count {
			c.Advance(time.Duration(rapid.Int64Range(0, 3000).Draw(rt, "gapMs")) * time.Millisecond)
			if rapid.Bool().Draw(rt, "flush") {
				_, err := n.svc.FlushDue(t.Context())
				require.NoError(rt, err)
			}
			k := rapid.SampledFrom([]string{`"a"`, `"b"`, `1`, `null`}).Draw(rt, "k")
			data := fmt.Sprintf(`{"k": %s, "i": %d}`, k, i)
			res := n.send(rt, ev(event, data, ""))
			require.Equal(rt, []EventRun{{Workflow: fmt.Sprintf("bat%d", round), Batched: true}, {Workflow: fmt.Sprintf("deb%d", round), Debounced: true}}, res[0].Runs)
			key, _ := flowctl.ResolveKey(json.RawMessage(data), "k")
			all = append(all, sent{id: res[0].ID, key: key, ts: c.Now().UnixMilli()})
		}
		c.Advance(time.Hour)
		_, err := n.svc.FlushDue(t.Context())
		require.NoError(rt, err)
		next, err := n.svc.FlushDue(t.Context())
		require.NoError(rt, err)
		require.True(rt, next.IsZero(), "every buffer fired")

		runsOf := func(url string) [][]string {
			runs, _, err := n.engine.Runs(t.Context(), project, nil, 10_000, func(r *delivery.Run) bool { return r.URL == url })
			require.NoError(rt, err)
			var out [][]string
			for _, r := range runs {
				var p payload
				require.NoError(rt, json.Unmarshal(r.History[0].Body, &p))
				var ids []string
				for _, e := range p.Events {
					ids = append(ids, e.ID)
				}
				require.Equal(rt, p.Events[0].ID, p.ID, "the top level is the first event")
				out = append(out, ids)
			}
			return out
		}
		byID := map[string]sent{}
		pos := map[string]int{}
		for i, s := range all {
			byID[s.id], pos[s.id] = s, i
		}

		// Batch.
		seen := map[string]int{}
		for _, ids := range runsOf(fmt.Sprintf("http://x.test/bat%d", round)) {
			require.LessOrEqual(rt, len(ids), maxSize)
			first := byID[ids[0]]
			for j, id := range ids {
				seen[id]++
				s := byID[id]
				require.Equal(rt, first.key, s.key, "one key per batch")
				require.Less(rt, s.ts, first.ts+batchMs, "received before the batch timed out")
				if j > 0 {
					require.Less(rt, pos[ids[j-1]], pos[id], "receive order")
				}
			}
		}
		require.Len(rt, seen, len(all), "every event is in a batch")
		for id, k := range seen {
			require.Equal(rt, 1, k, "event %s in exactly one batch", id)
		}

		// Debounce: the model's bursts.
		var want []string
		type burst struct {
			first, deadline int64
			last            string
		}
		open := map[string]*burst{}
		for _, s := range all {
			b := open[s.key]
			if b != nil && s.ts >= b.deadline {
				want = append(want, b.last)
				b = nil
			}
			if b == nil {
				b = &burst{first: s.ts}
				open[s.key] = b
			}
			b.last, b.deadline = s.id, flowctl.DebounceDeadline(b.first, s.ts, periodMs, capMs)
		}
		for _, b := range open {
			want = append(want, b.last)
		}
		var got []string
		for _, ids := range runsOf(fmt.Sprintf("http://x.test/deb%d", round)) {
			require.Len(rt, ids, 1, "a debounced run carries one event")
			got = append(got, ids[0])
		}
		require.ElementsMatch(rt, want, got, "debounce fires the last event of each burst: %s", strings.Join(want, ","))
	})
}
