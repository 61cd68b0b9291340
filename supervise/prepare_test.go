package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// prepare makes a start of the test binary in a PID namespace, run as
// mode with args, and closes it when the test ends.
func prepare(t *testing.T, mode string, args ...string) *Prepared {
	t.Helper()
	p, err := Prepare(Spec{Path: os.Args[0], Args: append([]string{os.Args[0]}, args...),
		Env: helperEnviron(os.Environ(), mode), Namespace: PIDNamespace})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// A prepared start runs the command with the environment Start gives, not
// the one it was prepared with, and only once Start gives the word.
func TestPreparedStartRunsWithStartsEnvironment(t *testing.T) {
	requireNamespaces(t)
	out := filepath.Join(t.TempDir(), "env")
	// Prepared as "exit OUT", which writes nothing: run as prepared, the
	// command would exit with 0 (OUT is not a number) and leave no file.
	p := prepare(t, "exit", out)
	c, err := p.Start(Spec{Env: append(helperEnviron(os.Environ(), "env"), "LEADERRUN_TOKEN=42")})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if st := waitDone(t, c); st != (Status{}) {
		t.Fatalf("the command ended with %v", st)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command did not run with Start's environment (the helper's env mode): %v", err)
	}
	env := strings.Split(string(data), "\n")
	if !slices.Contains(env, "LEADERRUN_TOKEN=42") {
		t.Errorf("the command's environment lacks Start's LEADERRUN_TOKEN=42:\n%s", data)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "LEADERRUN_INTERNAL_") || strings.HasPrefix(kv, tagEnv+"=") {
			t.Errorf("the command inherited the init's %s", kv)
		}
	}
	if _, err := p.Start(Spec{}); !errors.Is(err, ErrPreparedGone) {
		t.Errorf("a second Start: %v, want ErrPreparedGone", err)
	}
}

// A prepared start given up runs nothing: its init exits, and Close
// returns once it is gone.
func TestPreparedStartClosedRunsNothing(t *testing.T) {
	requireNamespaces(t)
	out := filepath.Join(t.TempDir(), "env")
	p := prepare(t, "env", out)
	c := p.c
	p.Close()
	select {
	case <-c.Done():
	default:
		t.Fatal("Close returned before the prepared init was gone")
	}
	if exists(out) {
		t.Error("a prepared start that was closed ran its command")
	}
	if _, err := p.Start(Spec{}); !errors.Is(err, ErrPreparedGone) {
		t.Errorf("Start after Close: %v, want ErrPreparedGone", err)
	}
}

// A prepared start whose init died says so, and runs nothing.
func TestPreparedStartWhoseInitDiedIsGone(t *testing.T) {
	requireNamespaces(t)
	out := filepath.Join(t.TempDir(), "env")
	p := prepare(t, "exit", out)
	if err := syscall.Kill(p.c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p.c)
	if _, err := p.Start(Spec{Env: helperEnviron(os.Environ(), "env")}); !errors.Is(err, ErrPreparedGone) {
		t.Fatalf("Start after the init died: %v, want ErrPreparedGone", err)
	}
	if exists(out) {
		t.Error("the command ran")
	}
}
