package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

func TestBackupEndpoint(t *testing.T) {
	t.Parallel()

	t.Run("Disabled", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{})
		r := env.call(t, http.MethodGet, "/admin/backup", nil)
		require.Equal(t, http.StatusNotFound, r.Status)
		require.Contains(t, r.errorMessage(t), "--admin-token")
	})

	t.Run("AdminTokenOnly", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{adminToken: "admin-secret"})
		for name, auth := range map[string]string{"Missing": "", "APIToken": "Bearer " + testToken, "Wrong": "Bearer admin"} {
			req := env.request(t, http.MethodGet, "/admin/backup", nil)
			req.Header.Del("Authorization")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			r := env.send(t, req)
			require.Equal(t, http.StatusUnauthorized, r.Status, name)
			require.Equal(t, "backup: missing or wrong admin token", r.errorMessage(t), name)
		}
	})

	t.Run("Snapshot", func(t *testing.T) {
		t.Parallel()
		if onPostgres() {
			t.Skip("a snapshot of the bbolt file; PostgreSQL is backed up with its own tools")
		}
		env := newAPI(t, envOptions{adminToken: "admin-secret"})
		id := env.publish(t, env.Endpoint.URL("/later"), []byte("kept"), "Upstash-Delay", "1h")
		req := env.request(t, http.MethodGet, "/admin/backup", nil)
		req.Header.Set("Authorization", "Bearer admin-secret")
		r := env.send(t, req)
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, strconv.Itoa(len(r.Body)), r.Header.Get("Content-Length"))
		path := filepath.Join(t.TempDir(), "copy.db")
		require.NoError(t, os.WriteFile(path, r.Body, 0o600))
		require.NoError(t, storage.Verify(path))
		copyStore, err := storage.Open(path, storage.Options{})
		require.NoError(t, err)
		defer copyStore.Close()
		require.NoError(t, copyStore.View(func(tx *storage.Tx) error {
			m, err := tx.Message(testProject, id)
			require.NoError(t, err, "the pending message is in the snapshot")
			require.Equal(t, "kept", string(m.Body))
			return nil
		}))
	})
}

// On PostgreSQL there is no file to stream: the answer says how to back up instead.
func TestBackupEndpointWithoutBoltFile(t *testing.T) {
	t.Parallel()
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(slog.New(slog.DiscardHandler))
	(&backupHandlers{token: "admin-secret", log: slog.New(slog.DiscardHandler)}).register(e)
	req := httptest.NewRequest(http.MethodGet, "/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer admin-secret")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "pg_dump")
}
