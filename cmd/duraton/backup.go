package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/duraton/duraton/storage"
)

// runBackup downloads GET /admin/backup into a temporary file beside --to, checks that it
// is whole (Content-Length) and a sound bbolt file, fsyncs it and renames it into place:
// a backup file either is complete or does not exist.
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	e := env(getenv)
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "file to write the snapshot to (required)")
	base := fs.String("url", e.str("DURATON_URL", "http://127.0.0.1:8080"), "base URL of the running server (DURATON_URL)")
	token := fs.String("admin-token", e("DURATON_ADMIN_TOKEN"), "the server's admin token (DURATON_ADMIN_TOKEN)")
	force := fs.Bool("force", false, "replace --to if it exists")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	switch {
	case *to == "":
		return errors.New("backup: --to FILE is required")
	case *token == "":
		return errors.New("backup: --admin-token (or DURATON_ADMIN_TOKEN) is required")
	}
	if _, err := os.Stat(*to); err == nil && !*force {
		return fmt.Errorf("backup: %s exists (use --force to replace it)", *to)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(*base, "/")+"/admin/backup", nil)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
		return fmt.Errorf("backup: server answered %d: %s", resp.StatusCode, body.Error)
	}
	want, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		return errors.New("backup: the server sent no Content-Length")
	}
	n, err := writeFileAtomic(*to, func(w io.Writer) (int64, error) { return io.Copy(w, resp.Body) }, func(tmp string, n int64) error {
		if n != want {
			return fmt.Errorf("got %d of %d bytes", n, want)
		}
		return storage.Verify(tmp)
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backup written to %s (%d bytes)\n", *to, n)
	return nil
}

// runRestore puts a backup in place as <data>/duraton.db. The server must be stopped: a
// data file held by a running server is refused, and so is any existing one without
// --force.
func runRestore(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	e := env(getenv)
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "backup file to restore (required)")
	dir := fs.String("data", e.str("DURATON_DATA", "duraton-data"), "data directory of the server to restore into (DURATON_DATA)")
	force := fs.Bool("force", false, "replace an existing data file")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *from == "" {
		return errors.New("restore: --from FILE is required")
	}
	if err := storage.Verify(*from); err != nil {
		return fmt.Errorf("restore: %s is not a usable backup: %w", *from, err)
	}
	target := dataFile(*dir)
	if _, err := os.Stat(target); err == nil {
		if !*force {
			return fmt.Errorf("restore: %s exists (use --force to replace it)", target)
		}
		if err := storage.Verify(target); errors.Is(err, storage.ErrLocked) {
			return fmt.Errorf("restore: %s is in use by a running server: stop it first", target)
		}
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	src, err := os.Open(*from)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer src.Close()
	n, err := writeFileAtomic(target, func(w io.Writer) (int64, error) { return io.Copy(w, src) }, func(tmp string, _ int64) error {
		return storage.Verify(tmp)
	})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// The replaced file's write-ahead log goes with it: over the restored file it would
	// be refused, and the server would not start.
	if err := storage.RemoveWAL(target); err != nil {
		return fmt.Errorf("restore: %s is in place, but its old write-ahead log could not be removed (delete %s-wal.* before starting the server): %w", target, target, err)
	}
	fmt.Fprintf(stdout, "restored %s into %s (%d bytes); start the server on --data %s\n", *from, target, n, *dir)
	return nil
}

// writeFileAtomic writes path through a temporary file in the same directory: fill
// writes it, check inspects it once it is synced and closed, and only then is it renamed
// over path (and the directory synced). On any error the temporary file is removed.
func writeFileAtomic(path string, fill func(io.Writer) (int64, error), check func(tmp string, n int64) error) (n int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if n, err = fill(f); err != nil {
		f.Close()
		return n, err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return n, err
	}
	if err = f.Close(); err != nil {
		return n, err
	}
	if err = check(tmp, n); err != nil {
		return n, err
	}
	if err = os.Rename(tmp, path); err != nil {
		return n, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return n, err
	}
	defer d.Close()
	return n, d.Sync()
}
