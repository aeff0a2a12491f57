package delivery

import (
	"context"
	"net"
	"net/http"

	"github.com/duraton/duraton/delivery/internal/h1"
)

// ClientTransport is the deliveries' HTTP client: an http.RoundTripper whose idle
// connections can be closed.
type ClientTransport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// NewClientTransport returns the HTTP client deliveries are sent with (plain http:// on
// the calling goroutine, the rest through fallback), with its default pool sizes, dialing
// with dial. It has no SSRF guard of its own: the engine's client dials through netguard
// (send.go). It exists so that `duraton bench floor` measures the very client deliveries
// use.
func NewClientTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error), fallback http.RoundTripper) (ClientTransport, error) {
	return h1.New(h1.Config{Dial: dial, Fallback: fallback})
}
