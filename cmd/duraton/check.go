package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/duraton/duraton/storage"
)

// errCheckFailed makes `duraton check` exit 1 after it printed what it found.
var errCheckFailed = errors.New("the data file is damaged")

// openStore opens the data file of dir for a server or an administration command. A
// damaged file is refused untouched; the error says what to do about it.
func openStore(dir string, opts storage.Options) (*storage.Store, error) {
	s, err := storage.Open(dataFile(dir), opts)
	if d := storage.LogDamageIn(err); d != nil {
		return nil, fmt.Errorf("%w\nDuraton has not modified the data file or its write-ahead log. Run `duraton check --data %s` for a report. "+
			"Either restore %s from a backup (its log goes with it), or go on without the log from the damage on, "+
			"losing the acknowledged commits it holds: `duraton recover --data %s --drop-log-after %d`", err, dir, dataFile(dir), dir, d.Offset)
	}
	if errors.Is(err, storage.ErrCorrupt) {
		return nil, fmt.Errorf("%w\nDuraton has not modified the file. Run `duraton check --data %s` for a full report, "+
			"and restore %s from a backup (keep the damaged copy for analysis)", err, dir, dataFile(dir))
	}
	return s, err
}

// runCheck is `duraton check`: bbolt's consistency check of the data file, read-only.
func runCheck(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory holding duraton.db (DURATON_DATA)")
	maxProblems := fs.Int("max-problems", 100, "stop listing problems after this many")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	if *maxProblems < 1 {
		return fmt.Errorf("--max-problems must be at least 1")
	}
	r, err := storage.Check(dataFile(*dir), *maxProblems)
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("%w: stop the running duraton first (check needs a consistent file)", err)
	}
	if err != nil {
		return err
	}
	if len(r.Problems) == 0 {
		fmt.Fprintf(stdout, "ok: %s (%d bytes, %d pages of %d bytes)\n", r.Path, r.Size, r.Pages, r.PageSize)
		return nil
	}
	fmt.Fprintf(stdout, "damaged: %s (%d bytes)\n", r.Path, r.Size)
	for _, p := range r.Problems {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	if r.Truncated {
		fmt.Fprintf(stdout, "  ... more problems (raise --max-problems)\n")
	}
	if d := r.LogDamage; d != nil && d.Offset >= 0 {
		fmt.Fprintf(stdout, "restore %s from a backup, or go on without the log from the damage on (losing what it holds): "+
			"duraton recover --data %s --drop-log-after %d; this check did not modify anything\n", r.Path, *dir, d.Offset)
		return errCheckFailed
	}
	fmt.Fprintf(stdout, "restore %s from a backup; this check did not modify it\n", r.Path)
	return errCheckFailed
}

// runRecover is `duraton recover`: the operator's explicit choice to go on without the
// damaged tail of the write-ahead log. It prints what it drops.
func runRecover(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data", env(getenv).str("DURATON_DATA", "duraton-data"), "data directory holding duraton.db (DURATON_DATA)")
	after := fs.Int64("drop-log-after", -1, "drop the write-ahead log from this offset of its damaged segment on (the offset `duraton check` reports)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	if *after < 0 {
		return fmt.Errorf("--drop-log-after OFFSET is required: the offset of the damage `duraton check --data %s` reports", *dir)
	}
	d, err := storage.DropLogAfter(dataFile(*dir), *after)
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("%w: stop the running duraton first", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dropped %s from offset %d: %d bytes holding %d records that read back valid after the damage\n", d.File, d.Offset, d.CutBytes, d.RecordsAfter)
	for _, p := range d.LaterSegments {
		fmt.Fprintf(stdout, "removed %s (a later segment)\n", p)
	}
	if len(d.LaterSegments) > 0 {
		fmt.Fprintf(stdout, "removed %d later segments, %d bytes\n", len(d.LaterSegments), d.LaterBytes)
	}
	fmt.Fprintf(stdout, "the acknowledged commits those records held are lost; the next start replays the log up to offset %d\n", d.Offset)
	return nil
}
