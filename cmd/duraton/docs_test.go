package main

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architectureDoc is the prose form of the layout; its "Package map" section lists every
// package of allowedImports (layout_test.go), one path a line in a fenced block.
const architectureDoc = "../../docs/architecture.md"

// TestArchitectureDocListsEveryPackage fails when docs/architecture.md's package map and
// the import-rule table differ, so neither can gain or lose a package without the other.
func TestArchitectureDocListsEveryPackage(t *testing.T) {
	t.Parallel()
	listed, err := packageMap(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(maps.Keys(allowedImports))
	for _, p := range want {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is in the import rules (layout_test.go) but not in the package map of docs/architecture.md", p)
		}
	}
	for _, p := range listed {
		if _, ok := allowedImports[p]; !ok {
			t.Errorf("docs/architecture.md's package map lists %s, which the import rules (layout_test.go) do not know", p)
		}
	}
	seen := map[string]bool{}
	for _, p := range listed {
		if seen[p] {
			t.Errorf("docs/architecture.md's package map lists %s twice", p)
		}
		seen[p] = true
	}
}

// packageMap reads the first fenced block after the "## Package map" heading of the
// Markdown file at path: one package path a line, blank lines ignored.
func packageMap(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		inSection, inFence bool
		paths              []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !inSection:
			inSection = line == "## Package map"
		case !inFence && strings.HasPrefix(line, "## "):
			return nil, errNoPackageMap(path)
		case strings.HasPrefix(line, "```"):
			if inFence {
				return paths, nil
			}
			inFence = true
		case inFence && line != "":
			paths = append(paths, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errNoPackageMap(path)
}

type errNoPackageMap string

func (e errNoPackageMap) Error() string {
	return string(e) + ": no fenced block under a \"## Package map\" heading"
}

// operationsDoc holds the configuration table: one row per flag of `dev` and `serve`,
// "| `--flag` | `DURATON_VAR` | default | meaning |".
const operationsDoc = "../../docs/operations.md"

// TestOperationsDocListsEveryFlag fails when a flag of `duraton dev` or `duraton serve` is
// missing from docs/operations.md's configuration table, when the table lists a flag
// neither has, or when a row's variable is not the one the flag reads.
func TestOperationsDocListsEveryFlag(t *testing.T) {
	t.Parallel()
	rows, err := flagTable(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{} // flag name → its DURATON_* variable ("" for none)
	for _, m := range []mode{modeDev, modeServe} {
		var usage strings.Builder
		if _, err := parseServerFlags(m, []string{"-h"}, &usage, func(string) string { return "" }); err == nil {
			t.Fatalf("%s -h: no error", m)
		}
		for name, env := range flagUsage(usage.String()) {
			flags[name] = env
		}
	}
	if len(flags) < 10 {
		t.Fatalf("read only %d flags from the usage text: %v", len(flags), flags)
	}
	for name, env := range flags {
		got, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("flag --%s is not in the configuration table of docs/operations.md", name)
		case got != env:
			t.Errorf("docs/operations.md gives --%s the variable %q; the flag reads %q", name, got, env)
		}
	}
	for name := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("docs/operations.md's configuration table lists --%s, which neither dev nor serve has", name)
		}
	}
}

var (
	tableRow  = regexp.MustCompile("^\\| `--([a-z0-9-]+)` \\| (?:`(DURATON_[A-Z0-9_]+)`)? *\\|")
	usageFlag = regexp.MustCompile(`^  -([a-z0-9-]+)`)
	usageEnv  = regexp.MustCompile(`\((DURATON_[A-Z0-9_]+)\)`)
)

// flagTable reads the rows of the Markdown flag table in the file at path: flag name →
// variable ("" when the row names none).
func flagTable(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rows := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	return rows, nil
}

// flagUsage reads flag.PrintDefaults output: flag name → the DURATON_* variable its
// usage names ("" for none).
func flagUsage(usage string) map[string]string {
	flags := map[string]string{}
	name := ""
	for line := range strings.SplitSeq(usage, "\n") {
		if m := usageFlag.FindStringSubmatch(line); m != nil {
			name = m[1]
			flags[name] = ""
		}
		if m := usageEnv.FindStringSubmatch(line); m != nil && name != "" {
			flags[name] = m[1]
		}
	}
	return flags
}
