package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sharedHarnessDir is the reference conformance harness of shared/ (beside the repository),
// relative to this package's directory.
const sharedHarnessDir = "../../../shared/conformance/upstash"

// conformanceTimeout bounds `node run-all.mjs` (every case, one after another).
const conformanceTimeout = 10 * time.Minute

var harnessSummary = regexp.MustCompile(`^(\d+) passed, (\d+) failed$`)

// TestSharedConformanceHarness runs the shared reference harness (the official
// @upstash/workflow 1.3.3 and @upstash/qstash 2.12.0, pinned in its own lock file) unchanged
// against a real duraton process. shared/ is read-only, so the harness is copied into a
// temporary directory and installed there with `npm ci`.
func TestSharedConformanceHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary, npm and Node")
	}
	src, err := filepath.Abs(sharedHarnessDir)
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(src, "run-all.mjs")); err != nil {
		skipOrFail(t, "the shared conformance harness is not at "+src)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH (Node >= 20 is needed)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "npm is not on PATH (Node >= 20 with npm is needed)")
	}

	dir := t.TempDir()
	require.NoError(t, copyTree(src, dir))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	install.Dir = dir
	out, err := install.CombinedOutput()
	cancel()
	if err != nil {
		t.Logf("npm ci output:\n%s", out)
		skipOrFail(t, "npm ci in the copied conformance harness failed: "+err.Error())
	}

	p := startDuraton(t, t.TempDir())

	ctx, cancel = context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run-all.mjs")
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(os.Environ()), p.Env()...)
	var tail tailBuffer
	logger := &lineLogger{t: t}
	cmd.Stdout = io.MultiWriter(logger, &tail)
	cmd.Stderr = logger
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	logger.Flush()
	if ctx.Err() != nil {
		t.Fatalf("node run-all.mjs did not finish within %s", conformanceTimeout)
	}
	last := tail.LastLine()
	m := harnessSummary.FindStringSubmatch(last)
	require.NotNil(t, m, "the harness must end with `N passed, M failed`, got %q", last)
	require.NoError(t, err, "node run-all.mjs failed: %s (output above)", last)
	require.Equal(t, "0", m[2], "harness summary: %s", last)
	require.NotEqual(t, "0", m[1], "the harness ran no check: %s", last)
}

// copyTree copies the regular files and directories under src into dst (which exists),
// making them writable so t.TempDir can remove them (shared/ is read-only). node_modules of
// the source, if any, is not copied: `npm ci` installs it from the lock file.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		default:
			return nil // symlinks and the like: the harness has none
		}
	})
}

// tailBuffer keeps the last complete non-empty line written to it.
type tailBuffer struct {
	partial string
	last    string
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	s := b.partial + string(p)
	lines := strings.Split(s, "\n")
	b.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if l = strings.TrimSpace(l); l != "" {
			b.last = l
		}
	}
	return len(p), nil
}

// LastLine is the last non-empty line, counting a trailing line without a newline.
func (b *tailBuffer) LastLine() string {
	if l := strings.TrimSpace(b.partial); l != "" {
		return l
	}
	return b.last
}
