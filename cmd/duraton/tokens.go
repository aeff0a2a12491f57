package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
)

// tokenIDLen is how much of a token's SHA-256 `tokens list` shows as its id.
const tokenIDLen = 16

var tokenIDPattern = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

const tokensUsage = `usage: duraton tokens list   [--data DIR | --store postgres://...]
       duraton tokens create --project ID [--token TOKEN] [--data DIR | --store postgres://...]
       duraton tokens revoke TOKEN-ID [--data DIR | --store postgres://...]   (TOKEN-ID: at least 8 hex digits from "tokens list")
       duraton tokens revoke --token TOKEN [--data DIR | --store postgres://...]`

// runTokens is `duraton tokens`: list, create and revoke API tokens, in the data
// directory of a stopped server or, with --store, in every shard of the PostgreSQL
// database replicas share (while they run: a running replica stops accepting a revoked
// token within server.Config.TokenCacheTTL). Only a token's SHA-256 is stored, so a lost token cannot
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
	stores, err := openAdminStores(ctx, *dir, *storeURL)
	if err != nil {
		return err
	}
	defer stores.Close()
	switch verb {
	case "list":
		return listTokens(stores, stdout)
	case "create":
		return createToken(stores, *project, *token, stdout)
	default:
		if *token != "" {
			id = server.TokenHash(*token)
		}
		return revokeToken(stores, id, stdout, stderr)
	}
}

// listTokens lists the tokens of every shard, ordered by hash.
func listTokens(stores *adminStores, stdout io.Writer) error {
	var tokens []storage.TokenEntry
	for i := range stores.count() {
		store, err := stores.shard(i)
		if err != nil {
			return err
		}
		if err := store.View(func(tx *storage.Tx) error {
			some, err := tx.Tokens()
			tokens = append(tokens, some...)
			return err
		}); err != nil {
			return err
		}
	}
	slices.SortFunc(tokens, func(a, b storage.TokenEntry) int { return strings.Compare(a.Hash, b.Hash) })
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

// createToken stores a token for project in the project's shard. The token must be new
// to every shard: the replicas' routing looks a token up in each.
func createToken(stores *adminStores, project, token string, stdout io.Writer) error {
	if token == "" {
		token = newToken(project)
	}
	hash := server.TokenHash(token)
	home := stores.shardOf(project)
	for i := range stores.count() {
		if i == home {
			continue // checked in the write below
		}
		store, err := stores.shard(i)
		if err != nil {
			return err
		}
		var owner string
		err = store.View(func(tx *storage.Tx) (err error) { owner, err = tx.TokenProject(hash); return err })
		if err == nil {
			return fmt.Errorf("this token already belongs to project %q", owner)
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	store, err := stores.shard(home)
	if err != nil {
		return err
	}
	err = store.Update(func(tx *storage.Tx) error {
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

// revokeToken deletes the one token whose hash starts with id, in whichever shard holds
// it; a prefix that matches several tokens, in one shard or across shards, is refused.
func revokeToken(stores *adminStores, id string, stdout, stderr io.Writer) error {
	holder, found := -1, 0
	for i := range stores.count() {
		store, err := stores.shard(i)
		if err != nil {
			return err
		}
		var n int
		if err := store.View(func(tx *storage.Tx) error { n = len(tx.TokensWithPrefix(id)); return nil }); err != nil {
			return err
		}
		if n > 0 {
			holder, found = i, found+n
		}
	}
	switch {
	case found == 0:
		return fmt.Errorf("no token with id %s (see `duraton tokens list`)", id)
	case found > 1:
		return fmt.Errorf("token id %s matches %d tokens; give more digits", id, found)
	}
	store, err := stores.shard(holder)
	if err != nil {
		return err
	}
	var revoked storage.TokenEntry
	var left int
	err = store.Update(func(tx *storage.Tx) error {
		matches := tx.TokensWithPrefix(id)
		if len(matches) != 1 {
			return fmt.Errorf("token id %s: the tokens changed while revoking (%d match now); run the command again", id, len(matches))
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
