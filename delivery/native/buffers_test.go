package native

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

// bubbleNode opens the data file in dir with the engine and the flusher running on the
// bubble's clock (time.Now inside a synctest bubble).
func bubbleNode(t *testing.T, dir string, ep *endpoint) (*node, func()) {
	return bubbleNodeWith(t, dir, ep)
}

// bubbleNodeWith is bubbleNode with any transport.
func bubbleNodeWith(t *testing.T, dir string, ep http.RoundTripper) (*node, func()) {
	return bubbleNodeConfig(t, dir, ep, func(*delivery.Config) {})
}

// bubbleNodeConfig is bubbleNodeWith with the engine's configuration changed by edit.
func bubbleNodeConfig(t *testing.T, dir string, ep http.RoundTripper, edit func(*delivery.Config)) (*node, func()) {
	store, err := storage.Open(filepath.Join(dir, "duraton.db"), storage.Options{})
	require.NoError(t, err)
	_, err = delivery.EnsureProject(t.Context(), store, delivery.Project{ID: project, CurrentSigningKey: "sig_a", NextSigningKey: "sig_b"}, "h")
	require.NoError(t, err)
	twice := storagetest.NewTwice(store)
	cfg := delivery.Config{Transport: ep, Logger: slog.New(slog.DiscardHandler), SweepInterval: 24 * time.Hour}
	edit(&cfg)
	e, err := delivery.New(cfg, twice)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	svc, err := New(Config{CheckURL: func(raw string) (*url.URL, error) { return url.Parse(raw) }}, twice, e)
	require.NoError(t, err)
	require.NoError(t, svc.Start(t.Context()))
	n := &node{store: store, engine: e, svc: svc}
	return n, func() {
		svc.Stop()
		n.close(t)
	}
}

// firstPayloads are the initial payloads of the first deliveries so far, by workflow.
func firstPayloads(t *testing.T, ep *endpoint) map[string][]payload {
	t.Helper()
	reqs, bodies := ep.got()
	out := map[string][]payload{}
	for i, r := range reqs {
		var hist []struct{ Body string }
		require.NoError(t, json.Unmarshal([]byte(bodies[i]), &hist), bodies[i])
		raw, err := base64.StdEncoding.DecodeString(hist[0].Body)
		require.NoError(t, err)
		var p payload
		require.NoError(t, json.Unmarshal(raw, &p))
		wf := r.Header.Get("Duraton-Workflow")
		out[wf] = append(out[wf], p)
	}
	return out
}

func eventDatas(p payload) []string {
	out := make([]string, len(p.Events))
	for i, e := range p.Events {
		out[i] = string(e.Data)
	}
	return out
}

// TestFlusherDeadlinesSurviveRestart: the flusher fires a debounce exactly periodMs after
// the last event of its burst and a batch exactly timeoutMs after its first event, on
// the clock, without polling; buffers and deadlines are in the data file, so deadlines
// that passed while the server was down fire at start-up, once, with all their events.
func TestFlusherDeadlinesSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ep := &endpoint{}
		n, stop := bubbleNode(t, dir, ep)
		n.register(t, "app", `{"workflows": [
			{"name": "deb", "url": "http://x.test/deb", "triggers": [{"event": "e"}], "debounce": {"periodMs": 5000, "key": "doc"}},
			{"name": "bat", "url": "http://x.test/bat", "triggers": [{"event": "e"}], "batch": {"maxSize": 10, "timeoutMs": 8000}}]}`)
		res := n.send(t, ev("e", `{"doc": "a", "n": 1}`, ""))
		require.Equal(t, []EventRun{{Workflow: "bat", Batched: true}, {Workflow: "deb", Debounced: true}}, res[0].Runs)
		time.Sleep(3 * time.Second)
		n.send(t, ev("e", `{"doc": "a", "n": 2}`, "")) // slides deb to t0+8 s
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		require.Empty(t, firstPayloads(t, ep), "nothing is due before t0+8 s")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		got := firstPayloads(t, ep)
		require.Len(t, got["deb"], 1)
		require.Equal(t, []string{`{"doc":"a","n":2}`}, eventDatas(got["deb"][0]), "the last event wins")
		require.Len(t, got["bat"], 1)
		require.Equal(t, []string{`{"doc":"a","n":1}`, `{"doc":"a","n":2}`}, eventDatas(got["bat"][0]))
		reqs, _ := ep.got()
		require.Len(t, reqs, 2)

		// New buffers, then the server stops before their deadlines and stays down past them.
		n.send(t, ev("e", `{"doc": "b", "n": 3}`, ""), ev("e", `{"doc": "c", "n": 4}`, ""))
		n.send(t, ev("e", `{"doc": "b", "n": 5}`, ""))
		stop()
		time.Sleep(time.Hour)
		_, stop = bubbleNode(t, dir, ep)
		synctest.Wait()
		got = firstPayloads(t, ep)
		require.Len(t, got["deb"], 3, "b and c fired at start-up")
		require.ElementsMatch(t, []string{`{"doc":"b","n":5}`, `{"doc":"c","n":4}`},
			[]string{string(got["deb"][1].Data), string(got["deb"][2].Data)})
		require.Len(t, got["bat"], 2)
		require.Equal(t, []string{`{"doc":"b","n":3}`, `{"doc":"c","n":4}`, `{"doc":"b","n":5}`}, eventDatas(got["bat"][1]))

		// Fired once: another restart fires nothing more.
		stop()
		n, stop = bubbleNode(t, dir, ep)
		synctest.Wait()
		reqs, _ = ep.got()
		require.Len(t, reqs, 5)
		next, err := n.svc.FlushDue(context.Background())
		require.NoError(t, err)
		require.True(t, next.IsZero(), "no buffer is left")

		// A deadline still ahead at start-up fires on time after the restart.
		n.send(t, ev("e", `{"doc": "d"}`, ""))
		stop()
		time.Sleep(2 * time.Second)
		_, stop = bubbleNode(t, dir, ep)
		synctest.Wait()
		reqs, _ = ep.got()
		require.Len(t, reqs, 5)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		reqs, _ = ep.got()
		require.Len(t, reqs, 6, "deb fired 5 s after its event")
		time.Sleep(3 * time.Second)
		synctest.Wait()
		reqs, _ = ep.got()
		require.Len(t, reqs, 7, "bat fired 8 s after its event")
		stop()
	})
}
