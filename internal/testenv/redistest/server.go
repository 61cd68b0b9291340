package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// ServerBinary is the redis-server that StartServer runs.
const ServerBinary = "/usr/bin/redis-server"

// Server is a private redis-server process on a loopback port, with
// nothing persisted, for tests that restart or inspect a server no other
// test uses.
type Server struct {
	tb   testing.TB
	dir  string
	port int
	args []string
	tls  bool // the port speaks TLS; see StartTLSServer

	mu     sync.Mutex // guards proc and exited
	proc   *os.Process
	exited chan error // receives the process's exit
}

// StartServer starts a private redis-server with args added to its
// command line, and stops it when tb ends. It skips tb (fails it in CI)
// when the binary is missing.
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return startServer(tb, false, args)
}

func startServer(tb testing.TB, tls bool, args []string) *Server {
	tb.Helper()
	if _, err := exec.LookPath(ServerBinary); err != nil {
		Require(tb) // the shared server is needed too; it says how to skip
		err = fmt.Errorf("%s: %w; install the redis-server package", ServerBinary, err)
		if os.Getenv("CI") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	s := &Server{tb: tb, dir: tb.TempDir(), args: args, tls: tls}
	var err error
	for range 3 { // another process may take the port between picking and binding
		if s.port, err = citest.FreePort(); err != nil {
			break
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// (rediss:// for TLS) URL, database 0.
func (s *Server) URL() string {
	if s.tls {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// Restart kills the server (SIGKILL: nothing is saved, and there is
// nothing to save) and starts it again on the same port, empty.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatalf("restart redis-server: %v", err)
	}
}

// Stop kills the server and waits for it to exit. It is safe to call more
// than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	<-s.exited
	s.proc = nil
}

// start runs redis-server in the foreground and returns once it logged that
// it accepts connections.
func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	args := append(append(port,
		"--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", ""),
		s.args...)
	cmd := exec.Command(ServerBinary, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan struct{})
	var log strings.Builder
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			logMu.Lock()
			log.WriteString(line + "\n")
			logMu.Unlock()
			if strings.Contains(line, "Ready to accept connections") {
				close(ready)
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		logMu.Lock()
		defer logMu.Unlock()
		return fmt.Errorf("redis-server exited (%v):\n%s", err, log.String())
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redis-server not ready after 10s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc, s.exited = cmd.Process, exited
	return nil
}
