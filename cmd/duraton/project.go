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

func runProject(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "list") {
		fmt.Fprintln(stderr, "usage: duraton project create NAME [--data DIR] | duraton project list [--data DIR]")
		return errUsage
	}
	fs := flag.NewFlagSet("project "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory (DURATON_DATA)")
	rest := args[1:]
	var name string
	if args[0] == "create" {
		if len(rest) == 0 || rest[0] == "" || rest[0][0] == '-' {
			fmt.Fprintln(stderr, "usage: duraton project create NAME [--data DIR]")
			return errUsage
		}
		name, rest = rest[0], rest[1:]
		if !projectIDPattern.MatchString(name) {
			return fmt.Errorf("project name %q must match %s", name, projectIDPattern)
		}
	}
	if err := fs.Parse(rest); err != nil {
		return errUsage
	}
	store, err := openForAdmin(*dir)
	if err != nil {
		return err
	}
	defer store.Close()
	if args[0] == "list" {
		projects, err := delivery.ListProjects(ctx, store)
		if err != nil {
			return err
		}
		for _, p := range projects {
			fmt.Fprintf(stdout, "%s\tcreated %s\n", p.ID, time.UnixMilli(p.CreatedAt).UTC().Format(time.RFC3339))
		}
		return nil
	}
	if _, err := delivery.ListProjects(ctx, store); err != nil {
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
	fmt.Fprintf(stdout, "project: %s\ntoken: %s\ncurrent signing key: %s\nnext signing key: %s\n", name, token, stored.CurrentSigningKey, stored.NextSigningKey)
	return nil
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
