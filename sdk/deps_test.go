package sdk

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps fails when the SDK (or sdk/wire) depends, even indirectly, on a server-side
// package or on the server's dependencies.
func TestDeps(t *testing.T) {
	t.Parallel()
	// forbiddenDeps are the import path prefixes the SDK must never depend on, with the
	// reason (docs/architecture.md, "Import rules and why").
	forbiddenDeps := map[string]string{
		"github.com/duraton/duraton/server":   "server side: the SDK must not pull in the HTTP server",
		"github.com/duraton/duraton/delivery": "server side: the engine",
		"github.com/duraton/duraton/storage":  "server side: the store",
		"github.com/duraton/duraton/flowctl":  "server side: admission rules",
		"github.com/duraton/duraton/cmd":      "the binary",
		"github.com/labstack/echo":            "the server's HTTP framework",
		"go.etcd.io/bbolt":                    "the server's storage engine",
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not available:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "github.com/duraton/duraton/sdk/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for prefix, why := range forbiddenDeps {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("sdk depends on %s: %s", dep, why)
			}
		}
	}
}
