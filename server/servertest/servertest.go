// Package servertest starts a complete Duraton (store, engine, HTTP API) in process on a
// loopback port, for tests and examples of other packages — the Go SDK's in particular,
// whose own code must not import anything server-side. Deliveries to loopback are
// allowed, and the project has the fixed dev credentials.
package servertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// Dev credentials, the same as `duraton dev`'s.
const (
	Token      = "eyJVc2VySUQiOiJkZWZhdWx0VXNlciIsIlBhc3N3b3JkIjoiZGVmYXVsdFBhc3N3b3JkIn0="
	CurrentKey = "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r"
	NextKey    = "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs"
)

// Server is a running in-process Duraton.
type Server struct {
	URL    string // base URL, e.g. http://127.0.0.1:41234
	Engine *delivery.Engine

	srv   *server.Server
	store *storage.Store
	dir   string
}

// Options tune the engine (zero: defaults).
type Options struct {
	Engine delivery.Config
	// WrapStore, if set, wraps the store the engine writes through (for example in
	// storagetest.Twice, to run every transaction function twice).
	WrapStore func(delivery.Store) delivery.Store
	// StoreURL, if set, is a postgres:// URL: the server runs on that database (one
	// replica, the leader) instead of a fresh bbolt file.
	StoreURL string
}

// openStore opens the server's store: bbolt in dir, or PostgreSQL at url.
func openStore(dir, url string) (*storage.Store, error) {
	if url == "" {
		return storage.Open(filepath.Join(dir, "duraton.db"), storage.Options{})
	}
	ctx := context.Background()
	eng, err := pg.Open(ctx, pg.Config{URL: url})
	if err != nil {
		return nil, err
	}
	// Lead, as a replica does: fenced writes and the leader's cache.
	epoch, err := eng.TryLead(ctx, "servertest", "http://127.0.0.1", time.Hour, 0)
	if err == nil && epoch == 0 {
		err = errors.New("servertest: another replica leads on this database")
	}
	if err != nil {
		eng.Close()
		return nil, err
	}
	eng.Fence("servertest", epoch)
	store, err := storage.OpenEngine(eng, storage.Options{})
	if err != nil {
		eng.Close()
		return nil, err
	}
	return store, nil
}

// Start runs a server on a fresh data directory. Close stops it.
func Start(opts Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "duraton-servertest-")
	if err != nil {
		return nil, err
	}
	store, err := openStore(dir, opts.StoreURL)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if _, err := delivery.EnsureProject(context.Background(), store, delivery.Project{ID: "default", Name: "default", UserID: "defaultUser",
		CurrentSigningKey: CurrentKey, NextSigningKey: NextKey}, server.TokenHash(Token)); err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	policy := netguard.Policy{Allow: netguard.LoopbackPrefixes()}
	cfg := opts.Engine
	cfg.Destinations, cfg.Logger = policy, log
	var engineStore delivery.Store = store
	if opts.WrapStore != nil {
		engineStore = opts.WrapStore(store)
	}
	engine, err := delivery.New(cfg, engineStore)
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	nat, err := native.New(native.Config{CheckURL: policy.CheckURL}, store, engine)
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	srv, err := server.New(server.Config{CheckDestination: policy.CheckURL, Logger: log, Native: nat}, engine)
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	if err := engine.Start(context.Background()); err != nil {
		ln.Close()
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	go srv.Serve(ln)
	return &Server{URL: "http://" + ln.Addr().String(), Engine: engine, srv: srv, store: store, dir: dir}, nil
}

// Env is what the SDKs read: QSTASH_URL, QSTASH_TOKEN and the signing keys.
func (s *Server) Env() func(string) string {
	vals := map[string]string{"QSTASH_URL": s.URL, "QSTASH_TOKEN": Token, "QSTASH_CURRENT_SIGNING_KEY": CurrentKey, "QSTASH_NEXT_SIGNING_KEY": NextKey}
	return func(k string) string { return vals[k] }
}

// StoreStats reports the store's group-commit totals.
func (s *Server) StoreStats() storage.Stats { return s.store.Stats() }

// Close stops the server: intake, then the engine, then the store.
func (s *Server) Close() {
	// A client may hold a connection that never sent a request; Shutdown would wait
	// seconds for it, so it gets a moment and the rest are closed.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	cancel()
	s.Engine.Stop()
	_ = s.store.Close()
	_ = os.RemoveAll(s.dir)
}
