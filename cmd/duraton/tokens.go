package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// tokenIDLen is how much of a token's SHA-256 `tokens list` shows as its id.
const tokenIDLen = 16

var tokenIDPattern = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

const tokensUsage = `usage: duraton tokens list   [--data DIR | --store postgres://...]
       duraton tokens create --project ID [--token TOKEN] [--data DIR | --store postgres://...]
       duraton tokens revoke TOKEN-ID [--data DIR | --store postgres://...]   (TOKEN-ID: at least 8 hex digits from "tokens list")
       duraton tokens revoke --token TOKEN [--data DIR | --store postgres://...]`

// runTokens is `duraton tokens`: list, create and revoke API tokens, in the data
// directory of a stopped server or, with --store, in the PostgreSQL database replicas
// share (while they run: a running replica stops accepting a revoked token within
// server.Config.TokenCacheTTL). Only a token's SHA-256 is stored, so a lost token cannot
// be shown again: revoke it and create a new one.
func runTokens(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "create" && args[0] != "revoke") {
		fmt.Fprintln(stderr, tokensUsage)
		return errUsage
	}
	verb, rest := args[0], args[1:]
	var id string
	if verb == "revoke" && len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		id, rest = rest[0], rest[1:]
	}
	fs := flag.NewFlagSet("tokens "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory (DURATON_DATA)")
	storeURL := fs.String("store", env(getenv).str("DURATON_STORE", ""), "postgres://... of the database replicas share; empty = bbolt in --data (DURATON_STORE)")
	project := fs.String("project", "", "project the new token belongs to (create)")
	token := fs.String("token", "", "the token itself: create uses it instead of generating one, revoke revokes it")
	if err := fs.Parse(rest); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, tokensUsage)
		return errUsage
	}
	switch {
	case verb == "create" && *project == "":
		return errors.New("tokens create: --project is required")
	case verb == "revoke" && (id == "") == (*token == ""):
		return errors.New("tokens revoke: give either a TOKEN-ID or --token, not both")
	case verb == "revoke" && id != "" && !tokenIDPattern.MatchString(id):
		return fmt.Errorf("tokens revoke: %q is not a token id (8 to 64 lower-case hex digits, as `tokens list` shows)", id)
	case verb == "create" && *token != "":
		if err := validateToken("--token", *token); err != nil {
			return err
		}
	}
	store, err := openTokenStore(ctx, *dir, *storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	switch verb {
	case "list":
		return listTokens(store, stdout)
	case "create":
		return createToken(store, *project, *token, stdout)
	default:
		if *token != "" {
			id = server.TokenHash(*token)
		}
		return revokeToken(store, id, stdout, stderr)
	}
}

// openTokenStore opens the store the token commands work on: the PostgreSQL database at
// storeURL, or else the data file in dir (whose server must be stopped). On PostgreSQL
// the commands write beside a running leader: they touch only the token records, which
// the leader reads afresh (its caches of them expire), never writes after start-up.
func openTokenStore(ctx context.Context, dir, storeURL string) (*storage.Store, error) {
	if storeURL == "" {
		return openForAdmin(dir)
	}
	if err := checkStoreURL(storeURL); err != nil {
		return nil, err
	}
	eng, err := pg.Open(ctx, pg.Config{URL: storeURL, MaxConns: 2})
	if err != nil {
		return nil, err
	}
	store, err := storage.OpenEngine(eng, storage.Options{})
	if err != nil {
		eng.Close()
		return nil, err
	}
	return store, nil
}

func listTokens(store *storage.Store, stdout io.Writer) error {
	var tokens []storage.TokenEntry
	if err := store.View(func(tx *storage.Tx) (err error) { tokens, err = tx.Tokens(); return err }); err != nil {
		return err
	}
	devHash := server.TokenHash(devToken)
	fmt.Fprintf(stdout, "TOKEN-ID\tPROJECT\n")
	for _, t := range tokens {
		note := ""
		if t.Hash == devHash {
			note = "\t(the public dev token)"
		}
		fmt.Fprintf(stdout, "%s\t%s%s\n", t.Hash[:tokenIDLen], t.Project, note)
	}
	return nil
}

func createToken(store *storage.Store, project, token string, stdout io.Writer) error {
	if token == "" {
		token = newToken(project)
	}
	hash := server.TokenHash(token)
	err := store.Update(func(tx *storage.Tx) error {
		if _, err := tx.Project(project); err != nil {
			return err
		}
		if owner, err := tx.TokenProject(hash); err == nil {
			return fmt.Errorf("this token already belongs to project %q", owner)
		}
		return tx.PutToken(hash, project)
	})
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("no project %q (see `duraton project list`)", project)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "project: %s\ntoken id: %s\ntoken: %s\n", project, hash[:tokenIDLen], token)
	return nil
}

func revokeToken(store *storage.Store, id string, stdout, stderr io.Writer) error {
	var revoked storage.TokenEntry
	var left int
	err := store.Update(func(tx *storage.Tx) error {
		matches := tx.TokensWithPrefix(id)
		switch len(matches) {
		case 0:
			return fmt.Errorf("no token with id %s (see `duraton tokens list`)", id)
		case 1:
		default:
			return fmt.Errorf("token id %s matches %d tokens; give more digits", id, len(matches))
		}
		revoked = matches[0]
		if err := tx.DeleteToken(revoked.Hash); err != nil {
			return err
		}
		all, err := tx.Tokens()
		left = 0
		for _, t := range all {
			if t.Project == revoked.Project {
				left++
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked token %s of project %s\n", revoked.Hash[:tokenIDLen], revoked.Project)
	if left == 0 {
		fmt.Fprintf(stderr, "project %q has no token left; make one with `duraton tokens create --project %s`\n", revoked.Project, revoked.Project)
	}
	return nil
}
