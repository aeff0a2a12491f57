package deliverytest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestSignalWaitWakesOnEmitAndTimesOut(t *testing.T) {
	t.Parallel()
	var s deliverytest.Signal[int]
	go func() {
		for i := range 5 {
			s.Emit(i)
		}
	}()
	got := s.Wait(t, 5*time.Second, 2, func(v int) bool { return v%2 == 1 })
	require.Equal(t, []int{1, 3}, got)

	ft := &fakeT{TB: t}
	s.Wait(ft, 10*time.Millisecond, 1, func(v int) bool { return v > 100 })
	require.Contains(t, ft.failed, "timed out")
}

func TestEndpointRecordsAndAnswers(t *testing.T) {
	t.Parallel()
	ep := deliverytest.NewEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		return 201 + n, http.Header{"X-N": {fmt.Sprint(n)}}, "hi"
	})
	for range 2 {
		resp, err := http.Post(ep.URL("/p?q=1"), "text/plain", strings.NewReader("body"))
		require.NoError(t, err)
		resp.Body.Close()
	}
	got := ep.Requests.Wait(t, 5*time.Second, 2, deliverytest.OnPath("/p"))
	require.Equal(t, "body", string(got[0].Body))
	require.Equal(t, ep.URL("/p?q=1"), got[1].URL)
}
