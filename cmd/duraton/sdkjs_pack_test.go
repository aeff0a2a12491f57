package main

// How an app depends on @duraton/sdk: `npm pack` in sdk/js makes a complete tarball
// (ESM, types, README, licence, engines), a fresh npm project installs it (offline once
// sdk/js has been installed: its lock file's entries are reused, the packages come from
// npm's cache), type-checks against it and runs a workflow on a real `duraton dev`.

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSDKJSPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary, npm and Node")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk", "js"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH (Node >= 20 is needed for the TypeScript SDK)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "npm is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript", "package.json")); err != nil {
		installSDKJS(t, dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(sdkEnv(os.Environ()), env...)
		cmd.WaitDelay = 10 * time.Second
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s %s:\n%s\n%s", filepath.Base(name), strings.Join(args, " "), out, stderr.String())
		return string(out)
	}

	// npm pack builds (prepack) and packs; the tarball goes to a temporary folder.
	packDir := t.TempDir()
	var packed []struct {
		Filename string `json:"filename"`
	}
	out := run(dir, nil, npm, "pack", "--json", "--pack-destination", packDir)
	// stdout is the prepack build's lines, then the JSON.
	require.NoError(t, json.Unmarshal([]byte(out[max(0, strings.Index(out, "\n[")):]), &packed), out)
	require.Len(t, packed, 1)
	tgz := filepath.Join(packDir, packed[0].Filename)
	files := tarballFiles(t, tgz)
	for _, f := range []string{"package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts", "dist/inline.js", "dist/verify.d.ts"} {
		require.Contains(t, files, f, "the tarball holds %s", f)
	}
	for f := range files {
		require.True(t, f == "package.json" || f == "README.md" || f == "LICENSE" || strings.HasPrefix(f, "dist/"), "nothing but the package ships: %s", f)
	}
	var manifest struct {
		Name         string            `json:"name"`
		Version      string            `json:"version"`
		Type         string            `json:"type"`
		License      string            `json:"license"`
		Engines      map[string]string `json:"engines"`
		Types        string            `json:"types"`
		Exports      map[string]any    `json:"exports"`
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal([]byte(files["package.json"]), &manifest))
	require.Equal(t, "@duraton/sdk", manifest.Name)
	require.Equal(t, "module", manifest.Type, "ESM")
	require.Equal(t, "MIT", manifest.License)
	require.Equal(t, ">=20", manifest.Engines["node"])
	require.Equal(t, "./dist/index.d.ts", manifest.Types)
	require.Equal(t, map[string]any{"types": "./dist/index.d.ts", "import": "./dist/index.js"}, manifest.Exports["."])
	require.Contains(t, files["LICENSE"], "MIT License")

	// A fresh project that depends on the tarball, locked to sdk/js's own versions.
	app := t.TempDir()
	writeAppLock(t, app, dir, tgz, manifest.Version, manifest.Dependencies)
	run(app, nil, npm, "ci", "--prefer-offline", "--no-audit", "--no-fund")
	require.NoError(t, os.WriteFile(filepath.Join(app, "app.ts"), []byte(packageAppSource), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(app, "tsconfig.json"), []byte(`{"compilerOptions":{"target":"ES2022","module":"NodeNext","moduleResolution":"NodeNext","strict":true,"skipLibCheck":true,"types":["node"],"typeRoots":[`+
		jsonString(filepath.Join(dir, "node_modules", "@types"))+`],"outDir":"out"},"files":["app.ts"]}`), 0o600))
	// Type-checked against the installed declarations, compiled, and run.
	run(app, nil, node, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	main := startDuraton(t, t.TempDir())
	got := run(app, main.Env(), node, filepath.Join("out", "app.js"))
	require.Contains(t, got, `result {"status":"succeeded","sum":{"a":2,"b":[4,6]}}`, got)
}

// packageAppSource is the app's one file: a workflow served with the Node adapter,
// registered, started by an event, and read back once its run ended.
const packageAppSource = `import http from "node:http";
import { workflow, serve, Client, runFor, type Context } from "@duraton/sdk";

const env = process.env;
const sum = workflow({
  name: "pkg.sum",
  retries: 0,
  handler: async (ctx: Context<{ n: number }>) => {
    const a = await ctx.step.run("a", () => ctx.event.data.n + 1);
    const b = await Promise.all([ctx.step.run("b1", () => a * 2), ctx.step.run("b2", () => a * 3)]);
    await ctx.step.sleep("nap", 1);
    return ctx.step.run("sum", () => ({ a, b }));
  },
});
let listener: http.RequestListener = (_req, res) => res.writeHead(503).end();
const server = http.createServer((req, res) => listener(req, res));
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const port = (server.address() as { port: number }).port;
const served = serve({ app: "pkg", workflows: [sum], baseUrl: "http://127.0.0.1:" + port + "/wf", env });
listener = served.node;
await served.ready;
const client = new Client({ env });
const started = runFor(await client.sendEvent({ name: "pkg.sum", data: { n: 1 } }), sum);
if (!started || !("runId" in started)) throw new Error("no run: " + JSON.stringify(started));
const deadline = Date.now() + 30_000;
for (;;) {
  const run = await client.getRun(started.runId);
  if (run.status === "succeeded" || run.status === "failed" || run.status === "cancelled") {
    const step = run.steps.find((s) => s.name === "sum");
    const out = typeof step?.out === "string" ? JSON.parse(step.out) : step?.out;
    console.log("result " + JSON.stringify({ status: run.status, sum: out }));
    break;
  }
  if (Date.now() > deadline) throw new Error("run did not end: " + JSON.stringify(run));
  await new Promise((r) => setTimeout(r, 100));
}
server.closeAllConnections();
server.close();
`

// tarballFiles reads an npm tarball: path (without the "package/" prefix) → content.
func tarballFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(io.LimitReader(tr, 4<<20))
		require.NoError(t, err)
		files[strings.TrimPrefix(h.Name, "package/")] = string(b)
	}
	return files
}

// writeAppLock writes the app's package.json and a package-lock.json that pins the
// tarball and, for its dependencies, sdk/js's own lock entries (resolved and integrity),
// so `npm ci` installs from npm's cache when sdk/js was installed on this machine.
func writeAppLock(t *testing.T, app, sdkDir, tgz, version string, deps map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(tgz)
	require.NoError(t, err)
	sum := sha512.Sum512(raw)
	dep := map[string]string{"@duraton/sdk": "file:" + tgz}
	pkg := map[string]any{"name": "duraton-sdk-app", "version": "1.0.0", "private": true, "type": "module", "dependencies": dep}
	var sdkLock struct {
		Packages map[string]map[string]any `json:"packages"`
	}
	lockRaw, err := os.ReadFile(filepath.Join(sdkDir, "package-lock.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(lockRaw, &sdkLock))
	packages := map[string]any{
		"": map[string]any{"name": "duraton-sdk-app", "version": "1.0.0", "dependencies": dep},
		"node_modules/@duraton/sdk": map[string]any{
			"version": version, "resolved": "file:" + tgz, "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
			"license": "MIT", "dependencies": deps, "engines": map[string]string{"node": ">=20"},
		},
	}
	for path, entry := range sdkLock.Packages {
		if path != "" && entry["dev"] != true {
			packages[path] = entry
		}
	}
	lock := map[string]any{"name": "duraton-sdk-app", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": packages}
	for name, v := range map[string]any{"package.json": pkg, "package-lock.json": lock} {
		b, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(app, name), b, 0o600))
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
