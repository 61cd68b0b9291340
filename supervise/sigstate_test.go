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
)

// TestCommandStartsWithTheSignalState: the command starts with the
// signals this process started with blocked and ignored, in a PID
// namespace (through its init) and without one (through the init
// program's exec mode, since this process does not ignore them), whatever
// this process does with them. grep reads its own state: a Go helper's
// runtime would change it before it could.
func TestCommandStartsWithTheSignalState(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("no grep")
	}
	saved := startSignals
	t.Cleanup(func() { startSignals = saved })
	bit := func(sigs ...syscall.Signal) (m uint64) {
		for _, s := range sigs {
			m |= 1 << (s - 1)
		}
		return m
	}
	startSignals.ignored |= bit(syscall.SIGHUP, syscall.SIGINT, syscall.SIGTSTP, syscall.SIGTTOU)
	startSignals.blocked |= bit(syscall.SIGTTIN, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGILL)
	want := fmt.Sprintf("blocked %016x ignored %016x", startSignals.blocked, startSignals.ignored)

	for _, ns := range []Namespace{NoNamespace, PIDNamespace} {
		t.Run(ns.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "status")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c, err := Start(Spec{Path: grep, Args: []string{"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"},
				Stdout: f, Namespace: ns})
			if errors.Is(err, ErrNamespace) {
				t.Skipf("no PID namespace here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := waitDone(t, c); st != (Status{}) {
				t.Fatalf("grep: %v", st)
			}
			c.Stop()
			data, _ := os.ReadFile(out)
			if got := signalLines(string(data)); got != want {
				t.Errorf("the command started with\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// signalLines returns the SigBlk and SigIgn masks of a /proc/PID/status.
func signalLines(status string) string {
	var blk, ign uint64
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		switch k {
		case "SigBlk":
			blk = n
		case "SigIgn":
			ign = n
		}
	}
	return fmt.Sprintf("blocked %016x ignored %016x", blk, ign)
}
