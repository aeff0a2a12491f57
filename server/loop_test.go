package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/sdk/wire"
)

// syncBuffer is a log sink the engine's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// received counts the requests ep got at a path ending in suffix.
func received(ep *recorder, suffix string) int {
	n := 0
	for _, q := range ep.all() {
		if strings.HasSuffix(q.URL, suffix) {
			n++
		}
	}
	return n
}

// deadLetterError publishes to dest without retries and returns the error its dead letter
// shows the tenant.
func deadLetterError(t *testing.T, env *apiEnv, dest string) string {
	t.Helper()
	id := env.publish(t, dest, []byte("x"), "Upstash-Retries", "0")
	var msg string
	eventually(t, "the dead letter of "+dest, func() bool {
		r := env.call(t, http.MethodGet, "/v2/dlq", nil)
		for _, d := range decodeJSON[wire.DLQPage](t, r).Messages {
			if d.MessageID == id {
				msg = d.Error
				return true
			}
		}
		return false
	})
	return msg
}

// A tenant cannot tell an internal name that resolves to a blocked address from one that
// does not answer: both read "connection failed"; the server log has the detail (issue 14,
// finding 10).
func TestBlockedDestinationLooksLikeAFailedConnection(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	// 127.0.0.2 is allowed and nothing listens on port 9 there: a refused connection.
	policy := netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	env := newAPI(t, envOptions{serveMode: true, engine: func(c *delivery.Config) {
		c.Destinations = policy
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}, config: func(c *Config) { c.CheckDestination = policy.CheckURL }})
	refused := deadLetterError(t, env, "http://127.0.0.2:9/x")
	blocked := deadLetterError(t, env, "http://localhost:9/x") // a name for a loopback address
	require.Equal(t, "connection failed", refused)
	require.Equal(t, refused, blocked, "a blocked address reads like a failed connection")
	require.Contains(t, logs.String(), "loopback", "the server log names why")
}

// Deliveries never go to the server's own listening address (a loop through
// /v2/publish), and a message that comes back through Duraton another way carries a hop
// count that ends the loop (issue 14, finding 10).
func TestDeliveryLoopsThroughDuratonAreRefused(t *testing.T) {
	t.Parallel()
	self := &netguard.SelfAddrs{}
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) {
		c.Destinations.Self = self
	}, config: func(c *Config) {
		p := netguard.Policy{Allow: netguard.LoopbackPrefixes(), Self: self}
		c.CheckDestination = p.CheckURL
	}})
	u, err := url.Parse(env.URL)
	require.NoError(t, err)
	require.NoError(t, self.Add(u.Host))
	ep := env.Endpoint

	t.Run("own address as an IP literal: 400 at publish", func(t *testing.T) {
		t.Parallel()
		r := env.call(t, http.MethodPost, "/v2/publish/"+env.URL+"/v2/publish/"+ep.URL("/direct"), []byte("x"),
			"Upstash-Forward-Authorization", "Bearer "+env.Token)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), "this server")
	})

	t.Run("own address behind a name: the delivery is refused", func(t *testing.T) {
		t.Parallel()
		named := strings.Replace(env.URL, "127.0.0.1", "localhost", 1)
		msg := deadLetterError(t, env, named+"/v2/publish/"+ep.URL("/named"))
		require.Equal(t, "connection failed", msg)
		require.Zero(t, received(ep, "/named"), "nothing came through the loop")
	})

	t.Run("every delivery carries the hop count, too many hops are refused", func(t *testing.T) {
		t.Parallel()
		env.publish(t, ep.URL("/hops"), []byte("x"), "Duraton-Hops", "3")
		got := ep.waitN(t, 1, func(q recorded) bool { return strings.HasSuffix(q.URL, "/hops") })[0]
		require.Equal(t, "4", got.Header.Get("Duraton-Hops"))
		env.publish(t, ep.URL("/hops0"), []byte("x"))
		got = ep.waitN(t, 1, func(q recorded) bool { return strings.HasSuffix(q.URL, "/hops0") })[0]
		require.Equal(t, "1", got.Header.Get("Duraton-Hops"))

		r := env.call(t, http.MethodPost, "/v2/publish/"+ep.URL("/too-many"), []byte("x"), "Duraton-Hops", "8")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), "Duraton-Hops")
		r = env.call(t, http.MethodPost, "/v2/publish/"+ep.URL("/bad"), []byte("x"), "Duraton-Hops", "x")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	})

	t.Run("a chain through a proxy stops at the hop limit", func(t *testing.T) {
		t.Parallel()
		target, err := url.Parse(env.URL)
		require.NoError(t, err)
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		t.Cleanup(proxy.Close)
		// Ten nested publishes, each forwarding the token to the next level.
		dest := ep.URL("/chain")
		for range 10 {
			dest = proxy.URL + "/v2/publish/" + dest
		}
		header := []string{"Upstash-Retries", "0"}
		for j := 1; j <= 10; j++ {
			header = append(header, strings.Repeat("Upstash-Forward-", j)+"Authorization", "Bearer "+env.Token)
		}
		env.publish(t, dest, []byte("x"), header...)
		// Hops 1..7 publish again; the delivery with Duraton-Hops 8 is refused.
		eventually(t, "the refused hop", func() bool {
			for _, ev := range env.logs(t, "state=ERROR&count=100").Events {
				if ev.ResponseStatus == http.StatusBadRequest && strings.Contains(ev.ResponseBody, "the limit is 8") {
					return true
				}
			}
			return false
		})
		require.Zero(t, received(ep, "/chain"))
	})
}

// A URL group whose endpoints lead back to its own publish (through a proxy, as a
// follower replica would be) multiplied by its size at every hop: one publish made
// thousands of messages. A Duraton delivery may now create one message only, so the
// group's first deliveries are refused and the request's work ends at the group's size.
func TestGroupAmplificationThroughTheAPIIsBounded(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	target, err := url.Parse(env.URL)
	require.NoError(t, err)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	named := strings.Replace(proxy.URL, "127.0.0.1", "localhost", 1) // a second endpoint
	env.addEndpoints(t, "amp", map[string]string{"name": "one", "url": proxy.URL + "/v2/publish/amp"},
		map[string]string{"name": "two", "url": named + "/v2/publish/amp"})
	header := []string{"Upstash-Retries", "0"}
	for j := 1; j <= 10; j++ {
		header = append(header, strings.Repeat("Upstash-Forward-", j)+"Authorization", "Bearer "+env.Token)
	}
	r := env.call(t, http.MethodPost, "/v2/publish/amp", []byte("x"), header...)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[[]wire.PublishResult](t, r), 2)

	refused := func() int {
		n := 0
		for _, ev := range env.logs(t, "state=FAILED&count=100").Events {
			if ev.ResponseStatus == http.StatusBadRequest && strings.Contains(ev.ResponseBody, "may create one message") {
				n++
			}
		}
		return n
	}
	eventually(t, "both deliveries refused", func() bool { return refused() == 2 })
	ids := map[string]bool{}
	for _, ev := range env.logs(t, "count=1000").Events {
		ids[ev.MessageID] = true
	}
	require.Len(t, ids, 2, "the publish made the group's two messages and nothing more")

	t.Run("a delivery may not publish a batch of more than one message or a schedule", func(t *testing.T) {
		batch := fmt.Appendf(nil, `[{"destination": %q, "body": "a"}, {"destination": %q, "body": "b"}]`, env.Endpoint.URL("/b1"), env.Endpoint.URL("/b2"))
		r := env.call(t, http.MethodPost, "/v2/batch", batch, "Duraton-Hops", "1", "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), "Duraton-Hops")
		one := fmt.Appendf(nil, `[{"destination": %q, "body": "a"}]`, env.Endpoint.URL("/b1"))
		r = env.call(t, http.MethodPost, "/v2/batch", one, "Duraton-Hops", "1", "Content-Type", "application/json")
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodPost, "/v2/batch", fmt.Appendf(nil, `[{"destination": "amp", "body": "a"}]`), "Duraton-Hops", "1", "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodPost, "/v2/schedules/"+env.Endpoint.URL("/s"), nil, "Duraton-Hops", "2", "Upstash-Cron", "* * * * *")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), "schedule")
		// Without the header, all of these are ordinary requests.
		r = env.call(t, http.MethodPost, "/v2/batch", batch, "Content-Type", "application/json")
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})
}
