package sdk_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind.
//
// Every test starts and stops its own Duraton and workflow server. The SDK client and
// the serve handler use http.DefaultTransport; its keep-alive connections (and a
// connection it dialled but did not need) would outlive those servers and hold a
// graceful shutdown for up to 5 seconds, so the tests run without keep-alives.
func TestMain(m *testing.M) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true
	http.DefaultTransport = transport
	code := m.Run()
	transport.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
