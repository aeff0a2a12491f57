package delivery

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// failingPaths answers 500 on paths under /fail and 200 elsewhere, in process.
type failingPaths struct{}

func (failingPaths) RoundTrip(r *http.Request) (*http.Response, error) {
	status := http.StatusOK
	if strings.HasPrefix(r.URL.Path, "/fail") {
		status = http.StatusInternalServerError
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("x")), Header: http.Header{}, Request: r}, nil
}

// TestRetentionSettingsAreHonoured: logs go after LogRetention, dead letters after
// DLQRetention, each on the first sweep past its age and not before.
func TestRetentionSettingsAreHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, store := bubbleEngine(t, failingPaths{}, Config{LogRetention: time.Hour, DLQRetention: 3 * time.Hour, SweepInterval: time.Minute})
		defer store.Close()
		defer e.Stop()
		_, err := e.Publish(t.Context(), []*Message{
			{Project: testProject, URL: "http://x.test/ok", Method: "POST"},
			{Project: testProject, URL: "http://x.test/fail", Method: "POST", Retries: 0},
		})
		require.NoError(t, err)
		synctest.Wait()

		counts := func() (logs, dlq int) {
			require.NoError(t, store.View(func(tx *storage.Tx) error {
				l, _, err := tx.ListLogs(testProject, "", 100, 1<<30, func(*storage.LogEvent) bool { return true })
				if err != nil {
					return err
				}
				d, _, err := tx.ListDLQ(testProject, "", 100, 1<<30, func(*storage.DLQEntry) bool { return true })
				logs, dlq = len(l), len(d)
				return err
			}))
			return logs, dlq
		}
		logs, dlq := counts()
		require.Equal(t, 4, logs, "CREATED and DELIVERED/FAILED of two messages")
		require.Equal(t, 1, dlq)

		time.Sleep(59 * time.Minute)
		synctest.Wait()
		logs, dlq = counts()
		require.Equal(t, []int{4, 1}, []int{logs, dlq}, "nothing is older than its retention yet")

		time.Sleep(2 * time.Minute)
		synctest.Wait()
		logs, dlq = counts()
		require.Equal(t, []int{0, 1}, []int{logs, dlq}, "logs older than 1h are gone, the dead letter stays")

		time.Sleep(2 * time.Hour)
		synctest.Wait()
		logs, dlq = counts()
		require.Equal(t, []int{0, 0}, []int{logs, dlq}, "the dead letter is gone after 3h")
	})
}
