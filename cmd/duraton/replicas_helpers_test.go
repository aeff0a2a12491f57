package main

// Harness for the multi-replica tests: real `duraton serve --store postgres://...`
// processes on one throwaway PostgreSQL database (storage/pg/pgtest), and a loopback
// endpoint that records, by its own clock, when every request arrived and ended.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

const (
	// replicaTTL and replicaGrace are the lease flags every test replica runs with: short,
	// so that a takeover is quick, and long enough that a loaded 2-core CI machine under
	// the race detector renews in time (the leader renews every TTL/5 = 400 ms).
	replicaTTL   = 2 * time.Second
	replicaGrace = 500 * time.Millisecond
)

// replicaCreds are the project credentials every replica of one test is started with.
type replicaCreds struct {
	Token, CurrentKey, NextKey string
}

func newReplicaCreds() replicaCreds {
	return replicaCreds{Token: newToken(devProject), CurrentKey: delivery.NewSigningKey(), NextKey: delivery.NewSigningKey()}
}

// replicaProc is one `duraton serve` replica. proc.stdout holds the lines after the
// `listening on` line (the `leading shard 0 (epoch N)` line among them).
type replicaProc struct {
	*proc
	ID string
}

var listeningLine = regexp.MustCompile(`^listening on (http://127\.0\.0\.1:\d+) \(replica (r-[0-9a-f]+), \d+ shards?\)$`)

// startReplica starts `duraton serve` on storeURL with creds, loopback destinations
// allowed and the test lease timings, and waits for its `listening on` line. extra are
// more flags. A cleanup stops it with SIGTERM (failing the test if it does not exit
// cleanly) and logs its output if the test failed.
func startReplica(t *testing.T, storeURL string, creds replicaCreds, extra ...string) *replicaProc {
	t.Helper()
	bin, err := duratonBinary()
	require.NoError(t, err)
	args := append([]string{"serve", "--store", storeURL, "--addr", "127.0.0.1:0",
		"--token", creds.Token, "--current-signing-key", creds.CurrentKey, "--next-signing-key", creds.NextKey,
		"--allow-cidrs", "127.0.0.0/8", "--lease-ttl", replicaTTL.String(), "--lease-grace", replicaGrace.String(),
		// Replicas share nothing on disk; a --data directory is still parsed.
		"--data", t.TempDir()}, extra...)
	if !slices.Contains(extra, "--shards") {
		args = append(args, "--shards", "1") // one leader: what these tests are about
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DURATON_TOKEN=", "DURATON_DATA=", "DURATON_STORE=")
	p := &proc{t: t, cmd: cmd, stderr: &lockedBuffer{}, stdout: &lockedBuffer{}, readDone: make(chan struct{}),
		Token: creds.Token, CurrentSigningKey: creds.CurrentKey, NextSigningKey: creds.NextKey}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start %s", bin)

	first := make(chan string, 1)
	go func() {
		defer close(p.readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			if !seen && listeningLine.MatchString(sc.Text()) {
				seen = true
				first <- sc.Text()
				continue
			}
			p.stdout.Write(append(sc.Bytes(), '\n'))
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	r := &replicaProc{proc: p}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- replica %s (%s)", r.ID, p.URL)
			p.logOutput()
		}
	})
	select {
	case line, ok := <-first:
		if !ok {
			t.Fatalf("duraton serve exited before its listening line (exit: %v)\nstdout: %s\nstderr: %s", p.wait(), p.stdout.String(), p.stderr.String())
		}
		m := listeningLine.FindStringSubmatch(line)
		p.URL, r.ID = m[1], m[2]
	case <-time.After(startupTimeout):
		t.Fatalf("duraton serve did not print its listening line within %s", startupTimeout)
	}
	return r
}

var leadingLine = regexp.MustCompile(`(?m)^leading shard 0 \(epoch (\d+)\)$`)

// epoch is the epoch this replica printed it leads with, 0 if it never led.
func (r *replicaProc) epoch() int64 {
	m := leadingLine.FindAllStringSubmatch(r.stdout.String(), -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return n
}

// startReplicas starts n replicas on storeURL and waits until one leads; it returns
// them and the leader.
func startReplicas(t *testing.T, storeURL string, creds replicaCreds, n int, extra ...string) ([]*replicaProc, *replicaProc) {
	t.Helper()
	var reps []*replicaProc
	for range n {
		reps = append(reps, startReplica(t, storeURL, creds, extra...))
	}
	leader, _ := waitLeader(t, reps, 1, startupTimeout)
	return reps, leader
}

// waitLeader polls until a replica of reps (not killed) printed that it leads with an
// epoch of at least minEpoch; it returns it and when that was seen.
func waitLeader(t *testing.T, reps []*replicaProc, minEpoch int64, timeout time.Duration) (*replicaProc, time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range reps {
			if !r.ended && r.epoch() >= minEpoch {
				return r, time.Now()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica leads with epoch >= %d after %s", minEpoch, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// followers are the replicas of reps other than leader.
func followers(reps []*replicaProc, leader *replicaProc) []*replicaProc {
	var out []*replicaProc
	for _, r := range reps {
		if r != leader {
			out = append(out, r)
		}
	}
	return out
}

// hit is one request the load endpoint received.
type hit struct {
	at, end time.Time // arrived / answered or found abandoned
	msgID   string
	body    string
	retried string
	aborted bool // the caller went away before the answer (its replica died)
	run     string
}

// loadEndpoint answers every request after a random 50–100 ms (or when its caller goes
// away) and records it.
type loadEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []*hit
}

func newLoadEndpoint(t *testing.T) *loadEndpoint {
	t.Helper()
	ep := &loadEndpoint{}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := &hit{at: time.Now(), msgID: r.Header.Get("Upstash-Message-Id"), retried: r.Header.Get("Upstash-Retried")}
		b, _ := io.ReadAll(r.Body)
		h.body = string(b)
		ep.mu.Lock()
		ep.hits = append(ep.hits, h)
		ep.mu.Unlock()
		hold := time.NewTimer(50*time.Millisecond + rand.N(50*time.Millisecond))
		defer hold.Stop()
		select {
		case <-hold.C:
		case <-r.Context().Done():
			ep.mu.Lock()
			h.end, h.aborted = time.Now(), true
			ep.mu.Unlock()
			return
		}
		// end is taken before the answer is written: the replica cannot see the answer,
		// and so cannot start the next delivery in the slot, before it.
		ep.mu.Lock()
		h.end = time.Now()
		ep.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *loadEndpoint) snapshot() []hit {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	out := make([]hit, len(ep.hits))
	for i, h := range ep.hits {
		out[i] = *h
	}
	return out
}

// waitHits polls until cond holds for the recorded requests, or fails after timeout.
func (ep *loadEndpoint) waitHits(t *testing.T, what string, timeout time.Duration, cond func([]hit) bool) []hit {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := ep.snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; requests so far:\n%s", timeout, what, hitTimeline(s, nil))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answeredBodies is the set of bodies that got an answer at least once.
func answeredBodies(hits []hit) map[string]bool {
	out := map[string]bool{}
	for _, h := range hits {
		if !h.end.IsZero() && !h.aborted {
			out[h.body] = true
		}
	}
	return out
}

// hitTimeline renders requests relative to the first, with marks (e.g. the SIGKILL).
func hitTimeline(hits []hit, marks map[string]time.Time) string {
	if len(hits) == 0 {
		return "  (none)"
	}
	t0 := hits[0].at
	type mark struct {
		at   time.Time
		what string
	}
	var ms []mark
	for w, at := range marks {
		ms = append(ms, mark{at, w})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].at.Before(ms[j].at) })
	var b strings.Builder
	for _, h := range hits {
		for len(ms) > 0 && ms[0].at.Before(h.at) {
			fmt.Fprintf(&b, "  --- %s at +%dms\n", ms[0].what, ms[0].at.Sub(t0).Milliseconds())
			ms = ms[1:]
		}
		end := "open"
		if !h.end.IsZero() {
			end = fmt.Sprintf("+%dms", h.end.Sub(t0).Milliseconds())
		}
		if h.aborted {
			end += " ABORTED"
		}
		fmt.Fprintf(&b, "  +%dms..%s %s %s body=%q retried=%s\n", h.at.Sub(t0).Milliseconds(), end, h.msgID, h.run, h.body, h.retried)
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "  --- %s at +%dms\n", m.what, m.at.Sub(t0).Milliseconds())
	}
	return b.String()
}

// maxInFlight is the largest number of requests open at once at the endpoint (intervals
// [at, end); one still open counts until now), and when it was reached.
func maxInFlight(hits []hit) (int, time.Time) {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, h := range hits {
		end := h.end
		if end.IsZero() {
			end = time.Now()
		}
		evs = append(evs, ev{h.at, +1}, ev{end, -1})
	}
	// At equal times an end comes first: [at, end) intervals that touch do not overlap.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	n, most := 0, 0
	var when time.Time
	for _, e := range evs {
		n += e.delta
		if n > most {
			most, when = n, e.at
		}
	}
	return most, when
}

// maxStartsInWindow is the most request arrivals within any window [s, s+window) that
// starts at an arrival s, and that s.
func maxStartsInWindow(hits []hit, window time.Duration) (int, time.Time) {
	ats := make([]time.Time, len(hits))
	for i, h := range hits {
		ats[i] = h.at
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	most := 0
	var when time.Time
	for i := range ats {
		n := 0
		for j := i; j < len(ats) && ats[j].Before(ats[i].Add(window)); j++ {
			n++
		}
		if n > most {
			most, when = n, ats[i]
		}
	}
	return most, when
}

// publishTo publishes body to dest through replica r under a flow-control key; it
// returns the status, the message id on a 2xx, and how long the call took.
func publishTo(ctx context.Context, client *http.Client, r *replicaProc, dest, body, key, value string) (int, string, time.Duration, error) {
	return publishAs(ctx, client, r, r.Token, dest, body, key, value)
}

// publishAs is publishTo with the API token of another project.
func publishAs(ctx context.Context, client *http.Client, r *replicaProc, token, dest, body, key, value string) (int, string, time.Duration, error) {
	start := time.Now()
	req, err := r.apiRequest(ctx, http.MethodPost, "/v2/publish/"+dest, strings.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	if key != "" {
		req.Header.Set("Upstash-Flow-Control-Key", key)
		req.Header.Set("Upstash-Flow-Control-Value", value)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, "", time.Since(start), err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	took := time.Since(start)
	if err != nil {
		return res.StatusCode, "", took, err
	}
	if res.StatusCode/100 != 2 {
		return res.StatusCode, "", took, fmt.Errorf("publish %q: %d %s", body, res.StatusCode, raw)
	}
	id := regexp.MustCompile(`"messageId":"([^"]+)"`).FindStringSubmatch(string(raw))
	if id == nil {
		return res.StatusCode, "", took, fmt.Errorf("publish %q: no messageId in %s", body, raw)
	}
	return res.StatusCode, id[1], took, nil
}
