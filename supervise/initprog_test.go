package supervise

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// testInitProgramEnv names a leaderrun-init binary that the test binary
// (and its helper supervisors) use as the namespaces' init, as leaderrun
// uses the one it embeds: `SUPERVISE_TEST_INIT_PROGRAM=path go test
// ./supervise/` runs every namespace test through it.
const testInitProgramEnv = "SUPERVISE_TEST_INIT_PROGRAM"

// useInitProgram makes the program at path the namespaces' init from now
// on; "" goes back to this program.
func useInitProgram(path string) {
	initFD.mu.Lock()
	defer initFD.mu.Unlock()
	if initFD.made && initFD.fd >= 0 {
		syscall.Close(initFD.fd)
	}
	initFD.made = false
	initProgram = nil
	if path != "" {
		initProgram = func() (io.ReadCloser, error) { return os.Open(path) }
	}
}

// buildInitProgram builds leaderrun-init as `make build` does.
func buildInitProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leaderrun-init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin,
		"github.com/leaderrun/leaderrun/internal/nsinit/leaderrun-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build leaderrun-init: %v\n%s", err, out)
	}
	return bin
}

// TestInitProgramRuns: with an init program present (embedded by make
// build), that program — from its memfd, not this one — is the namespace's
// init, and it keeps the init's promises: the exit status and the stop
// signal's death come through, signals are forwarded, and the namespace
// dies with a SIGKILLed supervisor.
func TestInitProgramRuns(t *testing.T) {
	requireNamespaces(t)
	bin := buildInitProgram(t)
	useInitProgram(bin)
	t.Cleanup(func() { useInitProgram(os.Getenv(testInitProgramEnv)) })
	t.Setenv(testInitProgramEnv, bin) // for the helper supervisors

	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "record", log, ready)
	waitFile(t, ready)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(c.Pid()) + "/exe")
	if err != nil || !strings.HasPrefix(exe, "/memfd:leaderrun-init") {
		t.Errorf("the namespace's init runs %q (%v), want the init program's memfd /memfd:leaderrun-init", exe, err)
	}
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR1 in the child's log", func() bool {
		data, _ := os.ReadFile(log)
		return strings.Contains(string(data), "SIGUSR1")
	})
	c.Stop()
	ready = filepath.Join(dir, "sleeping")
	c = startHelper(t, Spec{Namespace: PIDNamespace}, "sleep", ready)
	waitFile(t, ready)
	if got, want := c.Stop(), (Status{Signal: syscall.SIGTERM}); got != want {
		t.Errorf("Stop through the init program: status %v, want %v", got, want)
	}
	c = startHelper(t, Spec{Namespace: PIDNamespace}, "exit", "3")
	if got, want := waitDone(t, c), (Status{Code: 3}); got != want {
		t.Errorf("exit 3 through the init program: status %v, want %v", got, want)
	}
	t.Run("DiesWithSupervisor", TestPIDNamespaceDiesWithSupervisor)
}
