package native

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestThrottleBurstPacesFirstStarts: burst 1 lets one start go at once and paces the
// rest at limit per perMs from the first; the default burst (limit) lets limit go at once.
func TestThrottleBurstPacesFirstStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		n.register(t, "app", `{"workflows": [
			{"name": "paced", "url": "http://x.test/paced", "triggers": [{"event": "p"}], "throttle": {"limit": 3, "perMs": 3000, "burst": 1}},
			{"name": "bursty", "url": "http://x.test/bursty", "triggers": [{"event": "b"}], "throttle": {"limit": 3, "perMs": 3000}},
			{"name": "two", "url": "http://x.test/two", "triggers": [{"event": "t"}], "throttle": {"limit": 3, "perMs": 10000, "burst": 2}}]}`)
		t0 := time.Now()
		for _, name := range []string{"a", "b", "c", "d"} {
			n.send(t, ev("p", `{"n": "p`+name+`"}`, ""))
			n.send(t, ev("b", `{"n": "b`+name+`"}`, ""))
			n.send(t, ev("t", `{"n": "t`+name+`"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		byWorkflow := map[byte][]string{}
		for _, s := range ep.startsSince(t0) {
			byWorkflow[s[0]] = append(byWorkflow[s[0]], s)
		}
		for _, list := range byWorkflow {
			// Starts at the same instant arrive in any order: by time, then name.
			slices.SortStableFunc(list, func(a, b string) int {
				da, _ := time.ParseDuration(a[strings.IndexByte(a, '@')+1:])
				db, _ := time.ParseDuration(b[strings.IndexByte(b, '@')+1:])
				return cmp.Or(cmp.Compare(da, db), strings.Compare(a, b))
			})
		}
		require.Equal(t, []string{"pa@0s", "pb@1s", "pc@2s", "pd@3s"}, byWorkflow['p'], "burst 1: one at once, then one a second")
		require.Equal(t, []string{"ba@0s", "bb@0s", "bc@0s", "bd@1s"}, byWorkflow['b'], "default burst: limit at once")
		// 10 s / 3 is 3.333 s; a burst of 2 is a gate of 2 per 6.667 s, rounded up to the ms.
		require.Equal(t, []string{"ta@0s", "tb@0s", "tc@3.3335s", "td@6.667s"}, byWorkflow['t'], "burst 2: two at once, then the pace")
	})
}

// TestConcurrencyAppScopeShared: two workflows declaring the same app-scope key and limit
// share one limit per key value; a workflow-scope limit of the same text does not.
func TestConcurrencyAppScopeShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{
			hold: tenSeconds,
			label: func(wf string, d map[string]any) []string {
				acct, _ := d["account"].(string)
				if wf == "solo" {
					return []string{"solo:" + acct}
				}
				return []string{"shared:" + acct}
			},
		}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		n.register(t, "app", `{"workflows": [
			{"name": "sync", "url": "http://x.test/sync", "triggers": [{"event": "e"}], "concurrency": {"limit": 2, "key": "account", "scope": "app"}},
			{"name": "bill", "url": "http://x.test/bill", "triggers": [{"event": "e"}], "concurrency": {"limit": 2, "key": "account", "scope": "app"}},
			{"name": "solo", "url": "http://x.test/solo", "triggers": [{"event": "e"}], "concurrency": {"limit": 2, "key": "account"}}]}`)
		t0 := time.Now()
		for _, name := range []string{"1", "2"} {
			n.send(t, ev("e", `{"n": "a`+name+`", "account": "a"}`, ""))
			n.send(t, ev("e", `{"n": "b`+name+`", "account": "b"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		most := ep.mostInFlight()
		require.Equal(t, 2, most["shared:a"], "sync and bill share 2 slots for account a")
		require.Equal(t, 2, most["shared:b"])
		require.Equal(t, 2, most["solo:a"])
		at := map[string]int{}
		for _, s := range ep.startsSince(t0) {
			at[s[len(s)-3:]]++
		}
		// Per account: 4 shared runs (2 events × 2 workflows) through 2 slots: 2 at 0 s
		// and 2 at 10 s; solo's 2 runs per account start at once.
		require.Equal(t, map[string]int{"@0s": 4 + 4, "10s": 4}, at)
	})
}
