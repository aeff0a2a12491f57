package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
)

// listProjects lists the projects of every shard, ordered by id; on PostgreSQL each line
// says the shard the project lives in.
func listProjects(ctx context.Context, stores *adminStores, stdout io.Writer) error {
	type entry struct {
		p     delivery.Project
		shard int
	}
	var all []entry
	for i := range stores.count() {
		store, err := stores.shard(i)
		if err != nil {
			return err
		}
		projects, err := delivery.ListProjects(ctx, store)
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		for _, p := range projects {
			all = append(all, entry{p, i})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.p.ID, b.p.ID) })
	for _, e := range all {
		fmt.Fprintf(stdout, "%s\tcreated %s", e.p.ID, time.UnixMilli(e.p.CreatedAt).UTC().Format(time.RFC3339))
		if stores.sharded() {
			fmt.Fprintf(stdout, "\tshard %d", e.shard)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// createProjectInShard creates project name, with fresh signing keys and a first API
// token, in its shard of the PostgreSQL database; an existing name is refused. The
// replicas look tokens up in the database, so the shard's leader serves the project at
// once.
func createProjectInShard(ctx context.Context, stores *adminStores, name string, stdout io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	shard := stores.shardOf(name)
	store, err := stores.shard(shard)
	if err != nil {
		return err
	}
	token := newToken(name)
	hash := server.TokenHash(token)
	p := delivery.Project{ID: name, Name: name, CreatedAt: time.Now().UnixMilli(), CurrentSigningKey: delivery.NewSigningKey(), NextSigningKey: delivery.NewSigningKey()}
	err = store.Update(func(tx *storage.Tx) error {
		switch _, err := tx.Project(name); {
		case err == nil:
			return fmt.Errorf("project %q already exists (in shard %d); make another token for it with `duraton tokens create --project %s --store ...`", name, shard, name)
		case !errors.Is(err, storage.ErrNotFound):
			return err
		}
		created := p
		if err := tx.CreateProject(&created); err != nil {
			return err
		}
		return tx.PutToken(hash, name)
	})
	if err != nil {
		return err
	}
	printProject(stdout, name, token, &p)
	fmt.Fprintf(stdout, "shard: %d\n", shard)
	return nil
}
