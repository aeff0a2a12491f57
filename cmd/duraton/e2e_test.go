package main

// End-to-end harness: the tests in this package start the real duraton binary (built once
// per test binary run) and talk to it over loopback HTTP only.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const (
	// startupTimeout bounds the wait for the export lines on stdout.
	startupTimeout = 30 * time.Second
	// shutdownTimeout bounds a graceful (SIGTERM) shutdown.
	shutdownTimeout = 15 * time.Second
	// stderrTail is how much of a failed process's stderr ends up in the test log.
	stderrTail = 64 << 10
)

var (
	binDir    string // temp dir holding the built binary; removed after all tests
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "duraton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(2)
	}
	binDir = dir
	if !testing.Short() {
		// Build up front so a broken build fails fast, once, with the compiler output.
		if _, err := duratonBinary(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
		}
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// duratonBinary builds ./cmd/duraton into binDir exactly once and returns its path.
// DURATON_E2E_RACE=1 builds it with -race, so server races surface in e2e runs too;
// DURATON_E2E_BIN=/path/to/duraton uses an already built binary instead.
func duratonBinary() (string, error) {
	buildOnce.Do(func() {
		if prebuilt := os.Getenv("DURATON_E2E_BIN"); prebuilt != "" {
			binPath = prebuilt
			return
		}
		out := filepath.Join(binDir, "duraton")
		args := []string{"build", "-o", out}
		if os.Getenv("DURATON_E2E_RACE") != "" {
			args = append(args, "-race")
		}
		args = append(args, ".")
		cmd := exec.Command("go", args...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/duraton: %v\n%s", err, buf.String())
			return
		}
		binPath = out
	})
	return binPath, buildErr
}

// proc is one running duraton process.
type proc struct {
	URL               string // QSTASH_URL, e.g. http://127.0.0.1:41234
	Token             string // QSTASH_TOKEN
	CurrentSigningKey string // QSTASH_CURRENT_SIGNING_KEY
	NextSigningKey    string // QSTASH_NEXT_SIGNING_KEY

	t        testing.TB
	cmd      *exec.Cmd
	stderr   *lockedBuffer
	stdout   *lockedBuffer // stdout after the export lines
	ended    bool          // Kill or Stop was called: exiting is expected
	waitOnce sync.Once
	waitErr  error
	readDone chan struct{} // closed when stdout hit EOF
}

// exportKeys are the lines `duraton dev` must print first, in this order.
var exportKeys = []string{"QSTASH_URL", "QSTASH_TOKEN", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY", "DURATON_URL", "DURATON_TOKEN"}

// startDuraton starts `duraton dev --addr 127.0.0.1:0 --data dataDir`, waits for its
// export lines and returns the credentials. A cleanup stops it with SIGTERM (failing the test
// if that does not end it in time) and logs its stderr if the test failed.
func startDuraton(t testing.TB, dataDir string) *proc {
	t.Helper()
	return startDuratonAddr(t, dataDir, "127.0.0.1:0")
}

// startDuratonAddr is startDuraton listening on addr (host:port): a test that restarts the
// process and needs the same QSTASH_URL afterwards passes a fixed port. extra are more
// flags of `duraton dev`.
func startDuratonAddr(t testing.TB, dataDir, addr string, extra ...string) *proc {
	t.Helper()
	bin, err := duratonBinary()
	require.NoError(t, err)

	cmd := exec.Command(bin, append([]string{"dev", "--addr", addr, "--data", dataDir}, extra...)...)
	cmd.Env = os.Environ()
	p := &proc{t: t, cmd: cmd, stderr: &lockedBuffer{}, stdout: &lockedBuffer{}, readDone: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start %s", bin)

	lines := make(chan string, len(exportKeys))
	go func() {
		defer close(p.readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		n := 0
		for sc.Scan() {
			if n < len(exportKeys) {
				lines <- sc.Text()
				n++
				continue
			}
			p.stdout.Write(append(sc.Bytes(), '\n'))
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout) // after a scanner error (over-long line)
	}()

	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.logOutput()
		}
	})

	deadline := time.NewTimer(startupTimeout)
	defer deadline.Stop()
	vals := map[string]string{}
	for _, key := range exportKeys {
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
			if !ok {
				t.Fatalf("duraton exited or closed stdout before printing %s (exit: %v)", key, p.wait())
			}
		case <-deadline.C:
			t.Fatalf("duraton did not print its %d export lines within %s", len(exportKeys), startupTimeout)
		}
		k, v, err := parseExport(line)
		require.NoError(t, err)
		require.Equal(t, key, k, "export lines must come in the order %v", exportKeys)
		require.NotEmpty(t, v, "%s is empty", key)
		vals[k] = v
	}
	p.URL = strings.TrimSuffix(vals["QSTASH_URL"], "/")
	p.Token = vals["QSTASH_TOKEN"]
	p.CurrentSigningKey = vals["QSTASH_CURRENT_SIGNING_KEY"]
	p.NextSigningKey = vals["QSTASH_NEXT_SIGNING_KEY"]
	require.True(t, strings.HasPrefix(p.URL, "http://127.0.0.1:"), "QSTASH_URL must be a loopback URL, got %q", p.URL)
	require.Equal(t, vals["QSTASH_URL"], vals["DURATON_URL"], "DURATON_URL is the native API's name for QSTASH_URL")
	require.Equal(t, p.Token, vals["DURATON_TOKEN"])
	return p
}

// parseExport parses `export KEY=value` (tolerating quotes around value).
func parseExport(line string) (key, value string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
	if !ok {
		return "", "", fmt.Errorf("stdout line %q is not an `export KEY=value` line", line)
	}
	key, value, ok = strings.Cut(rest, "=")
	if !ok {
		return "", "", fmt.Errorf("stdout line %q has no '='", line)
	}
	if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
		value = value[1 : len(value)-1]
	}
	return key, value, nil
}

// Env returns the environment for a QStash SDK talking to this process.
func (p *proc) Env() []string {
	return []string{
		"QSTASH_URL=" + p.URL,
		"QSTASH_TOKEN=" + p.Token,
		"QSTASH_CURRENT_SIGNING_KEY=" + p.CurrentSigningKey,
		"QSTASH_NEXT_SIGNING_KEY=" + p.NextSigningKey,
	}
}

// Kill ends the process with SIGKILL (a crash: no shutdown code runs) and waits for it.
func (p *proc) Kill() {
	p.t.Helper()
	p.ended = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("SIGKILL duraton: %v", err)
	}
	_ = p.wait()
}

// Stop shuts the process down gracefully (SIGTERM) and waits; see stop.
func (p *proc) Stop() {
	p.t.Helper()
	p.stop()
	p.ended = true
}

// stop sends SIGTERM and waits for a graceful exit (status 0). A process that already died
// on its own, or is still running after shutdownTimeout (then killed), fails the test.
func (p *proc) stop() {
	if p.ended {
		return
	}
	select {
	case <-p.readDone: // stdout closed: the process ended before we asked it to
		p.t.Errorf("duraton exited on its own before the test ended: %v", p.wait())
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("duraton did not exit cleanly after SIGTERM: %v", err)
		}
	case <-time.After(shutdownTimeout):
		p.t.Errorf("duraton still running %s after SIGTERM; killing it", shutdownTimeout)
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// wait reaps the process once; every later call returns the same result.
func (p *proc) wait() error {
	p.waitOnce.Do(func() {
		<-p.readDone // all stdout read before Wait closes the pipe
		p.waitErr = p.cmd.Wait()
	})
	return p.waitErr
}

func (p *proc) logOutput() {
	p.t.Helper()
	errOut := p.stderr.String()
	if len(errOut) > stderrTail {
		errOut = "…" + errOut[len(errOut)-stderrTail:]
	}
	if errOut != "" {
		p.t.Logf("duraton stderr:\n%s", errOut)
	}
	if out := p.stdout.String(); out != "" {
		p.t.Logf("duraton stdout (after the export lines):\n%s", out)
	}
}

// newAPIClient returns an HTTP client whose idle connections are closed at the end of the
// test (goleak would report their goroutines otherwise).
func newAPIClient(t testing.TB, timeout time.Duration) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

// apiRequest builds an authenticated request against the duraton API.
func (p *proc) apiRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	return req, nil
}

// lockedBuffer is a bytes.Buffer safe for one writer goroutine and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
