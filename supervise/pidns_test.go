package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/nsinit"
	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// requireNamespaces skips when this process may not create PID namespaces.
func requireNamespaces(t *testing.T) {
	t.Helper()
	c, err := Start(Spec{Path: os.Args[0], Args: []string{os.Args[0], "0"},
		Env: helperEnviron(os.Environ(), "exit"), Namespace: PIDNamespace})
	if errors.Is(err, ErrNamespace) {
		citest.Missing(t, "cannot create PID namespaces here (%v); CI runs as root", err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitDone(t, c)
}

func TestPIDNamespaceStatusPassesThrough(t *testing.T) {
	requireNamespaces(t)
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "exit", "3")
	if got, want := waitDone(t, c), (Status{Code: 3}); got != want {
		t.Errorf("exit 3 through the namespace's init: status %v, want %v", got, want)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	c = startHelper(t, Spec{Namespace: PIDNamespace}, "sleep", ready)
	waitFile(t, ready)
	if got, want := c.Stop(), (Status{Signal: syscall.SIGTERM}); got != want {
		t.Errorf("Stop through the namespace's init: status %v, want %v", got, want)
	}
}

func TestPIDNamespaceForwardsSignals(t *testing.T) {
	requireNamespaces(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "record", log, ready)
	waitFile(t, ready)
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR1 in the child's log", func() bool {
		data, _ := os.ReadFile(log)
		return strings.Contains(string(data), "SIGUSR1")
	})
}

// TestPIDNamespaceDiesWithSupervisor SIGKILLs a supervisor whose child left
// a grandchild in another session, and checks that nothing of the
// namespace survives: the regression test for descendants outliving a
// SIGKILLed leaderrun.
func TestPIDNamespaceDiesWithSupervisor(t *testing.T) {
	requireNamespaces(t)
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	sup := startHelper(t, Spec{}, "supervise-ns", pidfile)
	waitFile(t, pidfile+".supervisor")
	ns := strings.TrimSpace(waitFile(t, pidfile+".pidns"))
	if got := len(inNamespace(ns)); got < 3 {
		t.Fatalf("%d live processes in %s, want init, child and grandchild", got, ns)
	}
	if err := sup.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, sup)
	deadline := time.Now().Add(testTimeout)
	for len(inNamespace(ns)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of %s alive %v after their supervisor was SIGKILLed", inNamespace(ns), ns, testTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inNamespace lists the live (not zombie) processes in PID namespace ns
// ("pid:[N]").
func inNamespace(ns string) []int {
	var pids []int
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	for _, l := range links {
		if target, err := os.Readlink(l); err != nil || target != ns {
			continue
		}
		pid, err := strconv.Atoi(strings.Split(l, "/")[2])
		if err != nil {
			continue
		}
		if st := procState(pid); st != "" && st != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestPIDNamespaceStopRightAfterStart stops a child the moment Start
// returns: the init must already forward the stop signal. It used to be
// lost (a namespace's init without a handler drops it: SIGKILL after the
// grace) or to end the init's Go runtime with exit status 2.
func TestPIDNamespaceStopRightAfterStart(t *testing.T) {
	requireNamespaces(t)
	for i := range 5 {
		ready := filepath.Join(t.TempDir(), "ready")
		c := startHelper(t, Spec{Namespace: PIDNamespace, KillGrace: 10 * time.Second}, "sleep", ready)
		start := time.Now()
		if got, want := c.Stop(), (Status{Signal: syscall.SIGTERM}); got != want {
			t.Fatalf("run %d: Stop right after Start: status %v after %v, want %v", i, got, time.Since(start).Round(time.Millisecond), want)
		}
	}
}

// TestPIDNamespaceSIGSTOPStopsTheCommand: SIGSTOP (Ctrl-Z at a terminal)
// must stop the command, not only the init, and SIGCONT resume it.
func TestPIDNamespaceSIGSTOPStopsTheCommand(t *testing.T) {
	requireNamespaces(t)
	ready := filepath.Join(t.TempDir(), "ready")
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "sleep", ready)
	waitFile(t, ready)
	kids := scanChildren(c.Pid())
	if len(kids) != 1 {
		t.Fatalf("init %d has children %v, want the command", c.Pid(), kids)
	}
	cmd := kids[0]
	for _, step := range []struct {
		sig   syscall.Signal
		state string
	}{{syscall.SIGSTOP, "T"}, {syscall.SIGCONT, "S"}} {
		if err := c.Signal(step.sig); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("command %d in state %s after %v", cmd, step.state, step.sig), func() bool {
			return procState(cmd) == step.state
		})
	}
	c.Stop()
}

// TestPIDNamespaceInitLeavesTheWorkingDirectory: the command starts in
// the directory it was given, and the namespace's init, which runs as
// long as the command does, moves to / once the command started, as
// dumb-init does: it must not keep the command's directory (a mount
// point, say) busy.
func TestPIDNamespaceInitLeavesTheWorkingDirectory(t *testing.T) {
	requireNamespaces(t)
	dir := t.TempDir()
	report := filepath.Join(t.TempDir(), "cwd")
	c := startHelper(t, Spec{Namespace: PIDNamespace, Dir: dir}, "cwd", report)
	if got := waitFile(t, report); got != dir {
		t.Errorf("the command's working directory is %q, want %q", got, dir)
	}
	initCwd := func() string {
		s, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", c.Pid()))
		return s
	}
	waitFor(t, "the init's working directory to be /", func() bool { return initCwd() == "/" })
	c.Stop()
}

// TestPIDNamespaceInitWithoutNonceExits starts this program as a
// namespace's init would be started, but closes the handshake pipe
// without the nonce, as a supervisor SIGKILLed while it forks the init
// does. Then the init has no parent-death signal: ForkExec's check for a
// parent that died before the child armed it compares getppid, which is 0
// in the new namespace, and the signal it sends itself, PID 1 there, is
// dropped. Such an init must exit at once, running nothing. It went on as
// the program instead: here the helper "env" wrote its file and exited 0;
// a re-executed leaderrun ran its arguments as a replica, PID 1 of its
// own namespace, for ever (seen left by a killed make test).
func TestPIDNamespaceInitWithoutNonceExits(t *testing.T) {
	requireNamespaces(t)
	file := filepath.Join(t.TempDir(), "env")
	_, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	hsR, hsW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], file)
	cmd.Env = append(helperEnviron(os.Environ(), "env"),
		nsinit.EnvValue(syscall.SIGTERM, time.Second, "00112233445566778899aabbccddeeff"))
	cmd.ExtraFiles = []*os.File{statusW, hsR} // descriptors 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	// The package's reaper, started by an earlier test's Start, reaps
	// every child of this process: it is kept from this one until Wait
	// has its status.
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	hsR.Close()
	hsW.Close() // no nonce: the supervisor is gone
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the init without its nonce still ran %v later", testTimeout)
	}
	if exists(file) {
		t.Errorf("the init without its nonce went on as the program that it is (helper env wrote its file)")
	}
	if code := cmd.ProcessState.ExitCode(); code != 125 || !strings.Contains(stderr.String(), "no nonce") {
		t.Errorf("the init without its nonce exited %d, stderr %q; want 125 and why", code, stderr.String())
	}
}
