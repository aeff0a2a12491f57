package main

import (
	"bufio"
	"maps"
	"os"
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
