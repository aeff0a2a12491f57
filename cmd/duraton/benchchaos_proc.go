package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// chaosServer runs `duraton dev` as a child process on a fixed address and data
// directory, so that it can be SIGKILLed and started again with the same URL and
// credentials. Each start logs to its own file in logDir.
type chaosServer struct {
	bin, addr, dataDir, logDir string
	args                       []string // extra flags for `dev`

	cmd    *exec.Cmd
	exited chan error
	log    *os.File
	starts int
	env    map[string]string // QSTASH_* as printed by the first start
}

// chaosExportLines is how many `export QSTASH_…=` lines `duraton dev` prints first.
const chaosExportLines = 4

// chaosStartTimeout bounds one start-up (opening the data file, recovery, listen).
const chaosStartTimeout = 30 * time.Second

// start starts the process and waits for its export lines (it then listens).
func (s *chaosServer) start() error {
	s.starts++
	logFile, err := os.Create(filepath.Join(s.logDir, fmt.Sprintf("server-%03d.log", s.starts)))
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, append([]string{"dev", "--addr", s.addr, "--data", s.dataDir}, s.args...)...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd, s.log, s.exited = cmd, logFile, make(chan error, 1)
	lines := make(chan string, chaosExportLines)
	go func() {
		sc := bufio.NewScanner(stdout)
		n := 0
		for n < chaosExportLines && sc.Scan() {
			lines <- sc.Text()
			n++
		}
		close(lines)
		_, _ = io.Copy(logFile, stdout)
		s.exited <- cmd.Wait()
	}()
	env := map[string]string{}
	deadline := time.NewTimer(chaosStartTimeout)
	defer deadline.Stop()
	for range chaosExportLines {
		select {
		case line, ok := <-lines:
			if !ok {
				return fmt.Errorf("duraton start %d exited before printing its credentials (log: %s)", s.starts, logFile.Name())
			}
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if !ok {
				return fmt.Errorf("duraton start %d printed %q, not an export line", s.starts, line)
			}
			env[k] = strings.Trim(v, `"'`)
		case <-deadline.C:
			s.kill()
			return fmt.Errorf("duraton start %d did not print its credentials within %s (log: %s)", s.starts, chaosStartTimeout, logFile.Name())
		}
	}
	if s.env == nil {
		s.env = env
	} else if env["QSTASH_URL"] != s.env["QSTASH_URL"] || env["QSTASH_TOKEN"] != s.env["QSTASH_TOKEN"] {
		return errors.New("duraton came back with other credentials")
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *chaosServer) kill() {
	s.signal(syscall.SIGKILL)
}

// stop ends the process with SIGTERM (a graceful shutdown), SIGKILL after 30 s.
func (s *chaosServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		s.cmd = nil
		s.log.Close()
	case <-time.After(30 * time.Second):
		s.kill()
	}
}

func (s *chaosServer) signal(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	<-s.exited
	s.cmd = nil
	s.log.Close()
}

func (s *chaosServer) getenv(k string) string { return s.env[k] }
