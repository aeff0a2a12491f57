package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/storage"
)

// probe calls a health route without a token and returns its validated answer.
func (e *apiEnv) probe(t *testing.T, path string) apiResponse {
	t.Helper()
	req := e.request(t, http.MethodGet, path, nil)
	req.Header.Del("Authorization")
	return e.send(t, req)
}

func TestHealthProbes(t *testing.T) {
	t.Parallel()

	t.Run("DrainingIsNotReady", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{})
		require.NoError(t, env.Server.Shutdown(context.Background()))
		r := env.probe(t, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Equal(t, "not ready: server shutting down", r.errorMessage(t))
		require.Equal(t, http.StatusOK, env.probe(t, "/healthz").Status, "still alive while draining")
	})

	t.Run("EngineStoppedIsNotReady", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{})
		env.Engine.Stop()
		r := env.probe(t, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Equal(t, "not ready: engine draining", r.errorMessage(t))
	})

	t.Run("NoTokenNeeded", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{})
		r := env.probe(t, "/healthz")
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ok"}`, string(r.Body))
		r = env.probe(t, "/readyz")
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ready"}`, string(r.Body))
	})

	t.Run("NotStartedIsNotReady", func(t *testing.T) {
		t.Parallel()
		store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, store.Close()) })
		engine, err := delivery.New(delivery.Config{Logger: slog.New(slog.DiscardHandler)}, store)
		require.NoError(t, err)
		srv, err := New(Config{CheckDestination: netguard.Policy{}.CheckURL, Logger: slog.New(slog.DiscardHandler)}, engine)
		require.NoError(t, err)
		api := httptest.NewServer(srv.Handler())
		t.Cleanup(api.Close)
		env := &apiEnv{URL: api.URL, client: &http.Client{Timeout: waitTimeout}}
		r := env.probe(t, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Equal(t, "not ready: engine not started", r.errorMessage(t))
	})

	t.Run("StoreClosedIsNotReady", func(t *testing.T) {
		t.Parallel()
		env := newAPI(t, envOptions{})
		require.NoError(t, env.store.Close())
		r := env.probe(t, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Contains(t, r.errorMessage(t), "not ready: store not readable")
	})
}
