package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// adminStores are the stores an administration command (project, tokens) works on: the
// data file of a stopped server, or every shard of the PostgreSQL database replicas
// share. On bbolt there is one store, shard 0 of one. On PostgreSQL each shard is a
// store of its own, opened on first use; a project's records live only in its shard
// (pg.ShardOf), and the commands write beside the running replicas, outside the fence:
// they touch only project and token records, which the leaders read afresh.
type adminStores struct {
	eng    *pg.Engine       // nil on bbolt
	stores []*storage.Store // by shard; nil until opened (on bbolt: the one store)
}

// adminStatementTimeout bounds the probe of a database before it is opened.
const adminStatementTimeout = 30 * time.Second

// openAdminStores opens the PostgreSQL database at storeURL or, when it is empty, the data
// file in dir (whose server must be stopped).
func openAdminStores(ctx context.Context, dir, storeURL string) (*adminStores, error) {
	if storeURL == "" {
		s, err := openForAdmin(dir)
		if err != nil {
			return nil, err
		}
		return &adminStores{stores: []*storage.Store{s}}, nil
	}
	eng, err := openShardedDB(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	return &adminStores{eng: eng, stores: make([]*storage.Store, eng.ShardCount())}, nil
}

// openShardedDB opens the database at storeURL for a command that is not a replica. It
// refuses a database no replica has opened yet: opening it would fix its number of
// shards, which only the first `duraton serve` (--shards) may choose.
func openShardedDB(ctx context.Context, storeURL string) (*pg.Engine, error) {
	if err := checkStoreURL(storeURL); err != nil {
		return nil, err
	}
	made, err := databaseMade(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	if !made {
		return nil, errors.New("no replica has opened the database at --store yet: start `duraton serve --store URL --shards N` first (the first replica sets the number of shards, which never changes)")
	}
	return pg.Open(ctx, pg.Config{URL: storeURL, MaxConns: 2})
}

// databaseMade tells whether a replica has set the database up: its shards are recorded,
// or it holds data from before shards (which pg.Open makes shard 0 of one).
func databaseMade(ctx context.Context, storeURL string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, adminStatementTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, storeURL)
	if err != nil {
		return false, fmt.Errorf("connect to --store: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var shards, buckets bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('duraton_shards') IS NOT NULL, to_regclass('duraton_buckets') IS NOT NULL`).
		Scan(&shards, &buckets); err != nil {
		return false, fmt.Errorf("read the database's tables: %w", err)
	}
	for _, q := range []struct {
		exists bool
		sql    string
	}{
		{shards, `SELECT EXISTS (SELECT 1 FROM duraton_shards)`},
		{buckets, `SELECT EXISTS (SELECT 1 FROM duraton_buckets)`},
	} {
		if !q.exists {
			continue
		}
		var rows bool
		if err := conn.QueryRow(ctx, q.sql).Scan(&rows); err != nil {
			return false, fmt.Errorf("read the database's tables: %w", err)
		}
		if rows {
			return true, nil
		}
	}
	return false, nil
}

// count is the number of shards (1 on bbolt).
func (a *adminStores) count() int { return len(a.stores) }

// sharded tells whether the stores are PostgreSQL's shards.
func (a *adminStores) sharded() bool { return a.eng != nil }

// shardOf is the shard project's records live in.
func (a *adminStores) shardOf(project string) int {
	if a.eng == nil {
		return 0
	}
	return pg.ShardOf(project, len(a.stores))
}

// shard returns the store of shard i, opening it on first use.
func (a *adminStores) shard(i int) (*storage.Store, error) {
	if a.stores[i] != nil {
		return a.stores[i], nil
	}
	e, err := a.eng.Shard(i)
	if err != nil {
		return nil, err
	}
	// The stores share the engine's pool, closed once by Close.
	s, err := storage.OpenEngine(keepOpen{e}, storage.Options{})
	if err != nil {
		return nil, fmt.Errorf("open shard %d: %w", i, err)
	}
	a.stores[i] = s
	return s, nil
}

// Close closes every opened store, then the database.
func (a *adminStores) Close() error {
	var errs []error
	for _, s := range a.stores {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if a.eng != nil {
		errs = append(errs, a.eng.Close())
	}
	return errors.Join(errs...)
}
