package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
)

var projectIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// openForAdmin opens the data file of a stopped server. A running server holds the
// file's lock; the error then says how to do the same thing over the API.
func openForAdmin(dir string) (*storage.Store, error) {
	s, err := openStore(dir, storage.Options{})
	if errors.Is(err, storage.ErrLocked) {
		return nil, fmt.Errorf("%w: stop the running duraton first (keys can also be rotated live with POST /v2/keys/rotate)", err)
	}
	return s, err
}

const projectUsage = `usage: duraton project create NAME [--data DIR | --store postgres://...]
       duraton project list [--data DIR | --store postgres://...]`

// runProject is `duraton project`: create a project (fresh signing keys and a first API
// token, printed once) or list them, in the data directory of a stopped server or, with
// --store, in the PostgreSQL database replicas share, while they run: a project lives in
// its shard, whose leader serves it at once.
func runProject(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "list") {
		fmt.Fprintln(stderr, projectUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("project "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory (DURATON_DATA)")
	storeURL := fs.String("store", env(getenv).str("DURATON_STORE", ""), "postgres://... of the database replicas share; empty = bbolt in --data (DURATON_STORE)")
	rest := args[1:]
	var name string
	if args[0] == "create" {
		if len(rest) == 0 || rest[0] == "" || rest[0][0] == '-' {
			fmt.Fprintln(stderr, projectUsage)
			return errUsage
		}
		name, rest = rest[0], rest[1:]
		if !projectIDPattern.MatchString(name) {
			return fmt.Errorf("project name %q must match %s", name, projectIDPattern)
		}
	}
	if err := fs.Parse(rest); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, projectUsage)
		return errUsage
	}
	stores, err := openAdminStores(ctx, *dir, *storeURL)
	if err != nil {
		return err
	}
	defer stores.Close()
	switch {
	case args[0] == "list":
		return listProjects(ctx, stores, stdout)
	case stores.sharded():
		return createProjectInShard(ctx, stores, name, stdout)
	}
	store, err := stores.shard(0)
	if err != nil {
		return err
	}
	token := newToken(name)
	p := delivery.Project{ID: name, Name: name, CreatedAt: time.Now().UnixMilli(), CurrentSigningKey: delivery.NewSigningKey(), NextSigningKey: delivery.NewSigningKey()}
	stored, err := delivery.EnsureProject(ctx, store, p, server.TokenHash(token))
	if err != nil {
		return err
	}
	if stored.CurrentSigningKey != p.CurrentSigningKey {
		fmt.Fprintf(stderr, "project %q already existed; a new token was added to it\n", name)
	}
	printProject(stdout, name, token, stored)
	return nil
}

func printProject(stdout io.Writer, name, token string, p *delivery.Project) {
	fmt.Fprintf(stdout, "project: %s\ntoken: %s\ncurrent signing key: %s\nnext signing key: %s\n", name, token, p.CurrentSigningKey, p.NextSigningKey)
}

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "show" && args[0] != "rotate") {
		fmt.Fprintln(stderr, "usage: duraton keys show|rotate --project ID [--data DIR]")
		return errUsage
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory (DURATON_DATA)")
	project := fs.String("project", "default", "project id")
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	store, err := openForAdmin(*dir)
	if err != nil {
		return err
	}
	defer store.Close()
	engine, err := delivery.New(delivery.Config{Logger: discardLogger()}, store)
	if err != nil {
		return err
	}
	var p *delivery.Project
	if args[0] == "rotate" {
		p, err = engine.RotateKeys(ctx, *project)
	} else {
		p, err = engine.Project(ctx, *project)
	}
	if err != nil {
		return fmt.Errorf("project %q: %w", *project, err)
	}
	fmt.Fprintf(stdout, "current signing key: %s\nnext signing key: %s\n", p.CurrentSigningKey, p.NextSigningKey)
	return nil
}
