package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/internal/procstat"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/samehost"
)

// TestFastStores runs the same-host fast path's scripts
// (testdata/script/fast_*.txtar) once per store (SQLite: TestScripts): every store takes a
// proved-dead holder's name over with Seize, and wakes a leader for a
// step-down request.
func TestFastStores(t *testing.T) { runFilesPerStore(t, "../testdata/script/fast_*.txtar") }

// forgewhere NAME HOLDER_PIDFILE COMMAND_PIDFILE START_DELTA: rewrite the
// Where of NAME's record, behind its holder's back, to name the process of
// HOLDER_PIDFILE as the holder and that of COMMAND_PIDFILE as its command,
// with the command's start time moved by START_DELTA ticks: a record that a
// follower must refuse to act on.
func cmdForgeWhere(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: forgewhere NAME HOLDER_PIDFILE COMMAND_PIDFILE START_DELTA")
	}
	holder, command := readPid(ts, args[1]), readPid(ts, args[2])
	delta, err := strconv.ParseInt(args[3], 10, 64)
	ts.Check(err)
	hs, err := procstat.Read(holder)
	ts.Check(err)
	cs, err := procstat.Read(command)
	ts.Check(err)
	// This process runs on the same boot and in the same PID namespace.
	here, err := samehost.Here(command, cs.Start)
	ts.Check(err)
	here.Pid, here.Start = holder, hs.Start
	here.ChildStart = uint64(int64(cs.Start) + delta)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := lease.Open(ctx, ts.Getenv("LEADERRUN_STORE"))
	ts.Check(err)
	defer store.Close()
	rec, err := store.Get(ctx, args[0])
	ts.Check(err)
	ts.Check(store.Annotate(ctx, args[0], rec.Holder, rec.Token, here.String()))
	ts.Logf("%s: where %s", args[0], here)
}

// reusepid OLD_PIDFILE NEW_PIDFILE: once the process named in OLD_PIDFILE
// is gone, start an unrelated process (sleep) under the same pid, leading a
// process group of its own (so that the group's number is the old one
// too), write its pid to NEW_PIDFILE, and kill it when the script ends.
// It chooses the pid with /proc/sys/kernel/ns_last_pid (root only).
func cmdReusePid(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: reusepid OLD_PIDFILE NEW_PIDFILE")
	}
	pid := readPid(ts, args[0])
	for range 200 {
		// Free again, if a process that took the pid first has ended: on
		// a busy machine (go test runs packages in parallel) one may hold
		// it for a while.
		waitFor(ts, fmt.Sprintf("pid %d to be free", pid), func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return err != nil
		})
		ts.Check(os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0))
		c := exec.Command("sleep", "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		ts.Check(c.Start())
		if c.Process.Pid == pid {
			ts.Defer(func() { c.Process.Kill(); c.Wait() })
			writeFile(ts.MkAbs(args[1]), strconv.Itoa(pid))
			return
		}
		c.Process.Kill() // another process took the pid first
		c.Wait()
	}
	ts.Fatalf("could not start a process under pid %d", pid)
}

// rootCondition is the [root] condition, for scripts that choose pids
// (reusepid).
func rootCondition() bool { return os.Geteuid() == 0 }
