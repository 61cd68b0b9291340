package supervise

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// TestDeliverSendsTheOnlyStopSignal: after Deliver, Stop sends no stop
// signal of its own, with and without a PID namespace. The command records
// SIGUSR1 (Deliver's) and would record SIGUSR2 (the later StopWith's); it
// ends by the kill grace's SIGKILL.
func TestDeliverSendsTheOnlyStopSignal(t *testing.T) {
	for _, ns := range []Namespace{NoNamespace, PIDNamespace} {
		t.Run(ns.String(), func(t *testing.T) {
			if ns != NoNamespace {
				requireNamespaces(t)
			}
			dir := t.TempDir()
			log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
			c := startHelper(t, Spec{Namespace: ns, KillGrace: 2 * time.Second}, "record", log, ready)
			waitFile(t, ready)
			awaitCommandKnown(t, c)
			c.Deliver(syscall.SIGUSR1)
			waitFor(t, "SIGUSR1 in the command's log", func() bool {
				data, _ := os.ReadFile(log)
				return string(data) == "SIGUSR1\n"
			})
			if got, want := c.StopWith(syscall.SIGUSR2), (Status{Signal: syscall.SIGKILL, Killed: true}); got != want {
				t.Errorf("StopWith after Deliver: status %v, want %v", got, want)
			}
			if data, _ := os.ReadFile(log); string(data) != "SIGUSR1\n" {
				t.Errorf("the command received %q, want only Deliver's SIGUSR1", data)
			}
		})
	}
}

// TestDeliverReachesTheCommandPastAStoppedInit: in a PID namespace the stop
// signal goes from the supervisor to the command's group itself, not
// through the namespace's init: it reaches the command while the init is
// stopped.
func TestDeliverReachesTheCommandPastAStoppedInit(t *testing.T) {
	requireNamespaces(t)
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "log"), filepath.Join(dir, "ready")
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "record", log, ready)
	waitFile(t, ready)
	awaitCommandKnown(t, c)
	if err := unix.Kill(c.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the init stopped", func() bool {
		st, err := procstat.Read(c.Pid())
		return err == nil && st.State == 'T'
	})
	c.Deliver(syscall.SIGUSR1)
	waitFor(t, "SIGUSR1 in the command's log while its init is stopped", func() bool {
		data, _ := os.ReadFile(log)
		return string(data) == "SIGUSR1\n"
	})
	unix.Kill(c.Pid(), syscall.SIGCONT)
	c.Stop()
}

// awaitCommandKnown waits until the supervisor holds a pidfd of the
// command that c's namespace init runs (after the init's started line), if
// c has one.
func awaitCommandKnown(t *testing.T, c *Child) {
	t.Helper()
	if c.ns != nil {
		waitFor(t, "a pidfd of the namespace's command", func() bool {
			theReaper.mu.Lock()
			defer theReaper.mu.Unlock()
			return c.cmd.held
		})
	}
}
