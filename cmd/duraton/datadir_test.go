package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveProc is one running `duraton serve`.
type serveProc struct {
	URL    string
	Stdout string // what it printed before it listened
	cmd    *exec.Cmd
	done   chan struct{}
}

// startServe starts `duraton serve --addr 127.0.0.1:0 --data dir extra...` and waits for
// its "duraton listening" log line. A cleanup stops it with SIGTERM.
func startServe(t *testing.T, dir string, extra ...string) *serveProc {
	t.Helper()
	bin, err := duratonBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, extra...)...)
	cmd.Env = append(os.Environ(), "DURATON_TOKEN=", "DURATON_DATA=")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errLog := &lockedBuffer{}
	cmd.Stderr = errLog
	require.NoError(t, cmd.Start())
	p := &serveProc{cmd: cmd, done: make(chan struct{})}
	out := &lockedBuffer{}
	listening := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				listening <- u
				continue
			}
			out.Write(append(sc.Bytes(), '\n'))
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(shutdownTimeout):
			_ = cmd.Process.Kill()
			<-p.done
			t.Errorf("serve did not stop after SIGTERM")
		}
	})
	select {
	case p.URL = <-listening:
	case <-p.done:
		t.Fatalf("serve exited before listening:\n%s%s", out.String(), errLog.String())
	case <-time.After(startupTimeout):
		t.Fatalf("serve did not listen within %s", startupTimeout)
	}
	p.Stdout = out.String()
	return p
}

// status answers GET /v2/queues with token.
func status(t *testing.T, baseURL, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, baseURL+"/v2/queues", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := newAPIClient(t, 10*time.Second).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	return res.StatusCode
}

var shownToken = regexp.MustCompile(`API token \(shown once\): (\S+)`)

// TestServePublicURLSecureCookie: `serve --public-url https://...` (a proxy terminates
// TLS in front of it) gives the console's session cookie the Secure attribute although
// the request reached it over plain HTTP; without the flag it does not.
func TestServePublicURLSecureCookie(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(s *serveProc) string {
		token := shownToken.FindStringSubmatch(s.Stdout)[1]
		res, err := client.PostForm(s.URL+"/console/login", url.Values{"token": {token}})
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		return res.Header.Get("Set-Cookie")
	}
	cookie := login(startServe(t, t.TempDir(), "--public-url", "https://duraton.example.com"))
	require.Contains(t, cookie, "duraton_console=")
	require.Contains(t, cookie, "; Secure")
	require.NotContains(t, login(startServe(t, t.TempDir())), "Secure")
}

// TestDataDirectoryModes: dev and serve each refuse the other's data directory unless
// --switch-mode is given, and serve never leaves the public dev token valid.
func TestDataDirectoryModes(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()

	t.Run("DevRefusesServeDirectory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s := startServe(t, dir)
		m := shownToken.FindStringSubmatch(s.Stdout)
		require.NotNil(t, m, s.Stdout)
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
		<-s.done

		code, _, stderr := runBinary(t, "dev", "--addr", "127.0.0.1:0", "--data", dir)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "belongs to `duraton serve`")
		require.Contains(t, stderr, "--switch-mode")

		// Told explicitly, dev takes it over; serve then refuses it in turn, and with
		// --switch-mode takes it back, revoking the public dev token and keys.
		d := startDuratonAddr(t, dir, "127.0.0.1:0", "--switch-mode")
		require.Equal(t, http.StatusOK, status(t, d.URL, devToken))
		d.Stop()

		code, _, stderr = runBinary(t, "serve", "--addr", "127.0.0.1:0", "--data", dir)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "belongs to `duraton dev`")

		s = startServe(t, dir, "--switch-mode")
		require.Contains(t, s.Stdout, "revoked the public dev token")
		require.Equal(t, http.StatusUnauthorized, status(t, s.URL, devToken))
		require.Equal(t, http.StatusOK, status(t, s.URL, m[1]), "the production token survives")
	})

	t.Run("ServeRefusesDevDirectory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		startDuraton(t, dir).Stop()
		code, _, stderr := runBinary(t, "serve", "--addr", "127.0.0.1:0", "--data", dir)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "belongs to `duraton dev`")

		s := startServe(t, dir, "--switch-mode")
		require.Contains(t, s.Stdout, "replaced the public dev signing keys")
		require.NotContains(t, s.Stdout, devCurrentKey)
		m := shownToken.FindStringSubmatch(s.Stdout)
		require.NotNil(t, m, "serve makes a token when the dev token was the only one: %s", s.Stdout)
		require.Equal(t, http.StatusUnauthorized, status(t, s.URL, devToken))
		require.Equal(t, http.StatusOK, status(t, s.URL, m[1]))
	})

	t.Run("ShortTokenRefused", func(t *testing.T) {
		t.Parallel()
		code, _, stderr := runBinary(t, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--token", "short-secret-123")
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "--token must be 32 to 1024 characters")
	})

	t.Run("GeneratedTokenSurvivesFailedStart", func(t *testing.T) {
		t.Parallel()
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer busy.Close()
		dir := t.TempDir()
		code, stdout, stderr := runBinary(t, "serve", "--addr", busy.Addr().String(), "--data", dir)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "listen on")
		m := shownToken.FindStringSubmatch(stdout)
		require.NotNil(t, m, "the generated token must be printed before the start can fail: %q", stdout)

		s := startServe(t, dir)
		require.NotContains(t, s.Stdout, "API token", "no second token: the first one is valid")
		require.Equal(t, http.StatusOK, status(t, s.URL, m[1]))
	})
}

// TestTokensCommand: list, create and revoke against a real data file.
func TestTokensCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	runCmd := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(context.Background(), args, &out, &errb, getenv)
		return code, out.String(), errb.String()
	}
	code, out, errOut := runCmd("project", "create", "acme", "--data", dir)
	require.Equal(t, 0, code, errOut)
	first := regexp.MustCompile(`token: (\S+)`).FindStringSubmatch(out)[1]

	code, out, errOut = runCmd("tokens", "create", "--project", "acme", "--data", dir)
	require.Equal(t, 0, code, errOut)
	second := regexp.MustCompile(`(?m)^token: (\S+)`).FindStringSubmatch(out)[1]
	secondID := regexp.MustCompile(`token id: (\S+)`).FindStringSubmatch(out)[1]
	require.NotEqual(t, first, second)

	code, _, errOut = runCmd("tokens", "create", "--project", "acme", "--token", "too-short", "--data", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "must be 32 to 1024 characters")
	code, _, errOut = runCmd("tokens", "create", "--project", "nope", "--data", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no project "nope"`)

	code, out, _ = runCmd("tokens", "list", "--data", dir)
	require.Equal(t, 0, code)
	require.Equal(t, 2, strings.Count(out, "\tacme"), out)
	require.Contains(t, out, secondID)

	code, _, errOut = runCmd("tokens", "revoke", "zz", "--data", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a token id")
	code, out, errOut = runCmd("tokens", "revoke", secondID[:8], "--data", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "revoked token "+secondID)
	require.Empty(t, errOut, "acme still has its first token")

	code, _, errOut = runCmd("tokens", "revoke", "--token", first, "--data", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, `project "acme" has no token left`)
	code, out, _ = runCmd("tokens", "list", "--data", dir)
	require.Equal(t, 0, code)
	require.NotContains(t, out, "acme")
}

// TestDevWarnsBeyondLoopback: `dev --addr 0.0.0.0:...` says that its public credentials
// are now reachable from the network.
func TestDevWarnsBeyondLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	bin, err := duratonBinary()
	require.NoError(t, err)
	cmd := exec.Command(bin, "dev", "--addr", "0.0.0.0:0", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "DURATON_DATA=")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	warned := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), "dev mode listens beyond loopback") {
				found = true
				warned <- true
			}
		}
		if !found {
			warned <- false
		}
	}()
	select {
	case ok := <-warned:
		require.True(t, ok, "dev exited without the warning")
	case <-time.After(startupTimeout):
		t.Fatal("no warning within the start-up timeout")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
}
