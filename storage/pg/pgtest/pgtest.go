// Package pgtest starts a real, throwaway PostgreSQL server for tests: initdb into a
// temporary directory, a server on a free loopback port with its socket in that
// directory, fsync on (the store's durability is what the tests check), and a fresh empty
// database per test. Test support only: production packages never import it.
//
// initdb refuses to run as root, so as root the server runs as the "postgres" user (the
// machine image and Debian's package create it). When no server binary can be found a
// test is skipped with a message saying so, except under CI (env CI non-empty), where it
// fails: CI must run these tests.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServer: no PostgreSQL server binaries (initdb, pg_ctl, postgres) were found.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server binaries (initdb, pg_ctl) in PATH or /usr/lib/postgresql/*/bin; install Debian's postgresql package")

// Cluster is a running throwaway server.
type Cluster struct {
	bin  string // directory of initdb, pg_ctl and postgres
	dir  string // temporary directory: data/, the socket, server.log
	port int
	cred *syscall.Credential // the server's user when running as root, else nil
	seq  atomic.Int64        // database names
}

// startTimeout bounds initdb and the server's start (both take about a second).
const startTimeout = 60 * time.Second

// Start starts a cluster for tb and stops it when tb ends. Prefer Shared: initdb costs a
// second or so per cluster.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := start()
	if err != nil {
		skipOrFail(tb, err)
		return nil
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// shared is the package-wide cluster of Main and Shared.
var shared struct {
	main bool // Main runs the tests
	once sync.Once
	c    *Cluster
	err  error
}

// Main runs a test package's tests (call it from TestMain) and stops the cluster Shared
// started, if any, before exiting.
func Main(m *testing.M) {
	shared.main = true
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Shared returns the test package's cluster, starting it on first use; Main stops it.
// The package's TestMain must call Main.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if !shared.main {
		tb.Fatal("pgtest.Shared needs the package's TestMain to call pgtest.Main, which stops the cluster")
	}
	shared.once.Do(func() { shared.c, shared.err = start() })
	if shared.err != nil {
		skipOrFail(tb, shared.err)
		return nil
	}
	return shared.c
}

// skipOrFail ends tb for a cluster that could not start: a skip when there is no server
// outside CI, a failure otherwise.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") == "" {
		tb.Skipf("skipped: %v (CI fails instead of skipping)", err)
		return
	}
	tb.Fatal(err)
}

// Port is the server's loopback TCP port.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's temporary directory (data, socket, server log).
func (c *Cluster) Dir() string { return c.dir }

// URL is a connection URL for database db as the superuser (trust authentication).
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// NewDatabase creates a fresh empty database for tb and returns its URL. The database is
// dropped when tb ends (connections still open then are terminated).
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%s", c.seq.Add(1), sanitize(tb.Name()))
	if len(name) > 63 { // PostgreSQL's identifier limit
		name = name[:63]
	}
	if err := c.admin(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := c.admin(context.Background(), "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

var notIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func sanitize(s string) string { return notIdent.ReplaceAllString(strings.ToLower(s), "_") }

// admin runs one statement in the maintenance database.
func (c *Cluster) admin(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, sql)
	return errors.Join(err, conn.Close(ctx))
}

// Stop stops the server (fast shutdown: connections are ended) and removes its files.
func (c *Cluster) Stop() error {
	if err := c.run("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return os.RemoveAll(c.dir)
}

// Pause stops the server (fast shutdown) and keeps its files, for Resume: a database
// outage, as the replicas see it.
func (c *Cluster) Pause() error {
	if err := c.run("pg_ctl", "stop", "-D", c.data(), "-m", "fast", "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume starts a paused server again, on the same port and with the same data.
func (c *Cluster) Resume() error { return c.startServer() }

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// start finds the binaries, runs initdb, configures and starts the server.
func start() (_ *Cluster, err error) {
	bin, err := findBin(debianBins)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	uid, gid := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
		uid, gid = int(c.cred.Uid), int(c.cred.Gid)
	}
	// The directory is not t.TempDir(): its parents are private to root, and the server's
	// user must reach the directory for the data and the socket.
	if c.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(c.dir)
		}
	}()
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return nil, err
	}
	// initdb's own fsyncs only protect the bootstrap files of a throwaway cluster; the
	// server below runs with fsync on.
	if err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return nil, fmt.Errorf("initdb: %w", err)
	}
	// A free port can be taken between probing and listening: try a few.
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		if err = c.startServer(); err == nil {
			return c, nil
		}
		if attempt == 2 {
			return nil, err
		}
	}
}

// startServer writes the settings for c.port and starts the server.
func (c *Cluster) startServer() error {
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 32MB
max_connections = 200
logging_collector = off
`, c.port, c.dir)
	// postgresql.auto.conf is read last and overrides postgresql.conf; it keeps its owner.
	if err := os.WriteFile(filepath.Join(c.data(), "postgresql.auto.conf"), []byte(conf), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		if err := os.Chown(filepath.Join(c.data(), "postgresql.auto.conf"), int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	logFile := filepath.Join(c.dir, "server.log")
	if err := c.run("pg_ctl", "start", "-D", c.data(), "-l", logFile, "-w", "-t", strconv.Itoa(int(startTimeout/time.Second))); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("start server on port %d: %w\nserver log:\n%s", c.port, err, tail(log, 2000))
	}
	return nil
}

// run runs one of the server's programs as the server's user.
func (c *Cluster) run(prog string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir // the server's user may not read the test's working directory
	cmd.Env = append(withoutPG(os.Environ()), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, tail(out.Bytes(), 2000))
	}
	return nil
}

// withoutPG drops PG* variables (PGDATA, PGPORT, ...) that would redirect the programs.
func withoutPG(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// postgresUser is the credential of the "postgres" user, for running the server as root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and initdb refuses root: need the postgres user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// debianBins is where Debian's packages put the server binaries, one directory per
// major version.
const debianBins = "/usr/lib/postgresql/*/bin"

// findBin is the directory holding initdb, pg_ctl and postgres: PATH first, then the
// newest version matching pattern (debianBins).
func findBin(pattern string) (string, error) {
	has := func(dir string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob(pattern)
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", ErrNoServer
}

// version is the major version of /usr/lib/postgresql/<version>/bin (0 if not a number).
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// freePort is a loopback TCP port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}
