package netguard

import (
	"net"
	"net/http"
	"time"
)

// Transport defaults.
const (
	// DefaultDialTimeout is the connect timeout NewTransport uses for a non-positive one.
	DefaultDialTimeout = 10 * time.Second
	// MaxIdleConnsPerHost keeps connections to busy destinations warm.
	MaxIdleConnsPerHost = 256
	tlsHandshakeTimeout = 10 * time.Second
	// IdleConnTimeout closes a connection idle for longer.
	IdleConnTimeout = 90 * time.Second
	// MaxResponseHeaderBytes caps the response headers an attempt reads.
	MaxResponseHeaderBytes = 1 << 20
)

// NewDialer returns a dialer that connects only to what p allows, checked after DNS on
// every connection. dialTimeout bounds each connect (DefaultDialTimeout if ≤ 0).
func NewDialer(p Policy, dialTimeout time.Duration) *net.Dialer {
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	return &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Control:   p.Control,
	}
}

// NewTransport returns an http.Transport that dials only what p allows (NewDialer) and
// never uses a proxy. dialTimeout bounds each connect (DefaultDialTimeout if ≤ 0); the
// overall request deadline is the caller's context.
func NewTransport(p Policy, dialTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // an env HTTP_PROXY would bypass the dial check
		DialContext:           NewDialer(p, dialTimeout).DialContext,
		ForceAttemptHTTP2:     true, // a custom DialContext otherwise disables HTTP/2
		MaxIdleConns:          4 * MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       IdleConnTimeout,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		// An endpoint's answer headers are held in memory per attempt (Go's default is
		// 10 MB); more than this fails the attempt.
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		// No "Accept-Encoding: gzip" on deliveries: an endpoint's answer is small and kept
		// as sent (callbacks, DLQ), and one header less is work the endpoint skips.
		DisableCompression: true,
	}
}
