package pgtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeTB records whether a test was skipped or failed.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()              {}
func (f *fakeTB) Skipf(string, ...any) { f.skipped = true }
func (f *fakeTB) Fatal(...any)         { f.failed = true }

// Without server binaries a test is skipped, except under CI, where it fails.
func TestNoServerSkipsOutsideCIAndFailsInCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBin(filepath.Join(t.TempDir(), "*", "bin"))
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("findBin with no binaries: %v, want ErrNoServer", err)
	}
	t.Setenv("CI", "")
	tb := &fakeTB{}
	skipOrFail(tb, err)
	if !tb.skipped || tb.failed {
		t.Fatalf("outside CI: skipped %v, failed %v; want a skip", tb.skipped, tb.failed)
	}
	t.Setenv("CI", "true")
	tb = &fakeTB{}
	skipOrFail(tb, err)
	if tb.skipped || !tb.failed {
		t.Fatalf("under CI: skipped %v, failed %v; want a failure", tb.skipped, tb.failed)
	}
	tb = &fakeTB{}
	t.Setenv("CI", "")
	skipOrFail(tb, errors.New("initdb: exit status 1"))
	if !tb.failed {
		t.Fatal("a server that is there but does not start must fail the test, not skip it")
	}
}

// The newest version's directory is chosen when PATH has none.
func TestFindBinPrefersNewestVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	for _, v := range []string{"9", "15", "13", "16"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		progs := []string{"initdb", "pg_ctl", "postgres"}
		if v == "16" {
			progs = progs[:2] // incomplete: no server
		}
		for _, p := range progs {
			if err := os.WriteFile(filepath.Join(dir, p), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := findBin(filepath.Join(root, "*", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin"); got != want {
		t.Fatalf("findBin = %s, want %s", got, want)
	}
}
