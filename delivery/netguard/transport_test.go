package netguard_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/netguard"
)

func TestNewTransport(t *testing.T) {
	t.Parallel()

	tr := netguard.NewTransport(netguard.Policy{}, 0)
	t.Cleanup(tr.CloseIdleConnections)

	// No proxy: an HTTP_PROXY in the environment must not carry requests past the
	// dial-time check.
	require.Nil(t, tr.Proxy)
	require.NotNil(t, tr.DialContext)
	require.True(t, tr.ForceAttemptHTTP2)
	require.Equal(t, netguard.MaxIdleConnsPerHost, tr.MaxIdleConnsPerHost)
	require.Positive(t, tr.TLSHandshakeTimeout)
	require.Positive(t, tr.IdleConnTimeout)
}

func TestTransportLoopback(t *testing.T) {
	t.Parallel()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ae := r.Header.Get("Accept-Encoding"); ae != "" {
			http.Error(w, "a delivery asks for no encoding, got "+ae, http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "delivered")
	}))
	t.Cleanup(srv.Close)

	t.Run("Blocked", func(t *testing.T) {
		t.Parallel()

		client := newClient(t, netguard.Policy{})
		resp, err := client.Get(srv.URL)
		if resp != nil {
			resp.Body.Close()
		}
		var blocked *netguard.BlockedError
		require.ErrorAs(t, err, &blocked)
		require.ErrorContains(t, err, "is a loopback address")
	})

	t.Run("Allowed", func(t *testing.T) {
		t.Parallel()

		client := newClient(t, netguard.Policy{Allow: netguard.LoopbackPrefixes()})
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "delivered", string(body))
	})
}

// TestTransportRedirectHop shows the dial check applies to every connection: a
// redirect from an allowed address to a blocked one fails at the second dial.
func TestTransportRedirectHop(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 not available: %v", err)
	}
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("blocked destination was reached")
	}))
	target.Listener.Close()
	target.Listener = ln
	target.Start()
	t.Cleanup(target.Close)

	origin := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	t.Cleanup(origin.Close)

	client := newClient(t, netguard.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	resp, err := client.Get(origin.URL)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorContains(t, err, "destination 127.0.0.2 is a loopback address")
}

func newClient(t *testing.T, p netguard.Policy) *http.Client {
	t.Helper()
	tr := netguard.NewTransport(p, time.Second)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}
