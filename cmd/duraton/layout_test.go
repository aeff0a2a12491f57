package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modulePath is the module's import path.
const modulePath = "github.com/duraton/duraton"

// allowedImports holds the import rules of docs/architecture.md for every package of the module:
// the module packages each may import directly. Sub-packages of a folder belong to it
// (delivery/internal/sched is delivery's), test-support packages (storagetest, pgtest,
// deliverytest, servertest) may import what they wire together, and no production
// package imports them.
var allowedImports = map[string][]string{
	"flowctl":                      {},
	"flowctl/expr":                 {},
	"storage":                      {"flowctl", "storage/kv", "storage/internal/wal", "storage/internal/boltkv", "storage/internal/walkv"},
	"storage/kv":                   {},
	"storage/internal/boltkv":      {"storage/kv"},
	"storage/internal/walkv":       {"storage/kv", "storage/internal/wal", "storage/internal/boltkv"},
	"storage/internal/wal":         {},
	"storage/internal/wal/waltest": {"storage/internal/wal"},
	"storage/storagetest":          {"storage", "storage/kv", "flowctl"},
	"storage/pg/pgtest":            {"storage", "storage/pg"},
	"storage/pg":                   {"storage/kv"},
	"delivery/internal/sched":      {"storage", "flowctl"},
	"delivery/internal/aimeter":    {"storage", "flowctl", "sdk/wire"},
	"delivery/netguard":            {},
	"delivery/internal/h1":         {},
	"delivery/retrydelay":          {},
	"delivery/deliverytest":        {},
	"delivery/schedule":            {"delivery", "storage", "sdk/wire"},
	"delivery/urlgroup":            {"storage"},
	"delivery/native":              {"delivery", "storage", "flowctl", "flowctl/expr", "sdk/wire"},
	"delivery":                     {"storage", "flowctl", "flowctl/expr", "sdk/wire", "delivery/internal/sched", "delivery/internal/aimeter", "delivery/netguard", "delivery/internal/h1", "delivery/retrydelay"},
	"server":                       {"delivery", "delivery/retrydelay", "delivery/netguard", "delivery/schedule", "delivery/urlgroup", "delivery/native", "flowctl", "flowctl/expr", "sdk/wire", "server/replica", "server/internal/authlimit", "server/live"},
	"server/internal/authlimit":    {},
	"server/metrics":               {"delivery"},
	"server/live":                  {"delivery"},
	"server/tracing":               {"delivery", "delivery/native"},
	"server/console":               {"delivery", "delivery/native", "flowctl", "sdk/wire", "server/internal/authlimit", "server/live"},
	"server/servertest":            {"server", "delivery", "delivery/native", "delivery/netguard", "storage", "storage/pg"},
	"server/replica":               {"sdk/wire"},
	"sdk/wire":                     {},
	"sdk":                          {"sdk/wire"},
	"cmd/duraton":                  {"*"},
}

// testSupport are the packages only tests (and cmd's benchmarks) may import.
var testSupport = []string{"storage/storagetest", "storage/internal/wal/waltest", "storage/pg/pgtest", "delivery/deliverytest", "server/servertest"}

// TestImportRules fails when a package imports a module package the rules do not allow
// it, or when a package appears that the table does not know.
func TestImportRules(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not available:", err)
	}
	out, err := exec.Command(goTool, "list", "-json=ImportPath,Imports", modulePath+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		allowed, known := allowedImports[pkg]
		if !known {
			t.Errorf("package %s is not in the import rules (cmd/duraton/layout_test.go): add it with what it may import, and to the package map of docs/architecture.md", pkg)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, modulePath+"/")
			if slices.Contains(allowed, "*") {
				continue
			}
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s: not allowed by the import rules (docs/architecture.md)", pkg, dep)
			}
			if slices.Contains(testSupport, dep) && !slices.Contains(testSupport, pkg) {
				t.Errorf("%s (production) imports the test-support package %s", pkg, dep)
			}
		}
	}
}
