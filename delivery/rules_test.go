package delivery

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// parseNonTest parses a directory's non-test Go files; a directory without any fails the
// test, so a rule cannot pass by checking nothing (as after a move of the folder).
func parseNonTest(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = file
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s: the rule would check nothing", dir)
	}
	return out
}

// TestWritesGoThroughUpdate makes the group committer's rule mechanical: the engine
// writes only through update (tx.go), whose functions return what they made. A direct
// Store.Update elsewhere is a function that could leak the state of a discarded run.
func TestWritesGoThroughUpdate(t *testing.T) {
	t.Parallel()
	for name, file := range parseNonTest(t, ".") {
		if name == "tx.go" {
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Update" {
				t.Errorf("%s: direct .Update call; write through update() in tx.go", name)
			}
			return true
		})
	}
}

// TestSchedulerIsPure keeps delivery/internal/sched a value: no goroutines, no locks, no clock,
// no storage access (it may name storage's record types only).
func TestSchedulerIsPure(t *testing.T) {
	t.Parallel()
	for name, file := range parseNonTest(t, filepath.Join("internal", "sched")) {
		for _, imp := range file.Imports {
			switch strings.Trim(imp.Path.Value, `"`) {
			case "sync", "sync/atomic", "context", "net/http", "os":
				t.Errorf("sched/%s imports %s", name, imp.Path.Value)
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("sched/%s starts a goroutine", name)
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					switch {
					case x.Name == "time" && (n.Sel.Name == "Now" || n.Sel.Name == "Sleep" || n.Sel.Name == "After" || n.Sel.Name == "NewTimer"):
						t.Errorf("sched/%s reads the clock (time.%s): now is passed in", name, n.Sel.Name)
					case x.Name == "storage" && (n.Sel.Name == "Tx" || n.Sel.Name == "Store"):
						t.Errorf("sched/%s touches storage (storage.%s)", name, n.Sel.Name)
					}
				}
			}
			return true
		})
	}
}
