package supervise

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
	"github.com/leaderrun/leaderrun/internal/procstat"
	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"golang.org/x/sys/unix"
)

// testCgroupErr is why the test binary runs in no cgroup of its own
// (cgrouptest.Enter, from TestMain), or nil. In a cgroup of its own its
// children's cgroups are made below it, where no other leaderrun on the
// host reclaims them: a test of the reclaim sees this package's work
// alone.
var testCgroupErr error

// requireCgroups skips where children get no cgroup of their own, or
// where the test binary has no cgroup of its own for them.
func requireCgroups(t *testing.T) string {
	t.Helper()
	base := childCgroups(slog.New(slog.DiscardHandler), true)
	switch {
	case base == "":
		citest.Missing(t, "cannot create cgroups here (cgroup v2, as root or delegated); CI runs as root")
	case testCgroupErr != nil:
		citest.Missing(t, "the test binary has no cgroup of its own, where other leaderruns on the host would not reclaim its children's: %v", testCgroupErr)
	}
	return base
}

// cgroupOf returns pid's cgroup v2 path ("" when it has exited).
func cgroupOf(pid int) string {
	rel, _ := cgroupv2.Of(strconv.Itoa(pid))
	return rel
}

func TestChildRunsInACgroupOfItsOwnRemovedByStop(t *testing.T) {
	base := requireCgroups(t)
	ready := filepath.Join(t.TempDir(), "ready")
	c := startHelper(t, Spec{}, "sleep", ready)
	waitFile(t, ready)
	if c.cg == nil {
		t.Fatal("no cgroup for the child")
	}
	if got := filepath.Base(cgroupOf(c.Pid())); got != filepath.Base(c.cg.dir) || !strings.HasPrefix(got, cgroupPrefix) {
		t.Fatalf("child %d in cgroup %q, want %s", c.Pid(), cgroupOf(c.Pid()), c.cg.dir)
	}
	c.Stop()
	if _, err := os.Stat(c.cg.dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Stop (%v)", c.cg.dir, err)
	}
	if filepath.Dir(c.cg.dir) != base {
		t.Errorf("cgroup %s not below %s", c.cg.dir, base)
	}
}

// deadProcess returns the stat of a process that has exited: the pid and
// start time of a leaderrun that died.
func deadProcess(t *testing.T) procstat.Stat {
	t.Helper()
	dead := exec.Command("sleep", "300")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := procstat.Read(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Process.Kill()
	dead.Wait() // (or this package's reaper reaps it)
	return st
}

// TestDeadSupervisorsCgroupIsReclaimed plays a SIGKILLed leaderrun: a
// cgroup named after a process that has exited, with a live process in it,
// is killed and removed; one named after a live process (this one) is left,
// and so is one of another PID namespace that a live leaderrun holds
// locked; one of another namespace that none holds, empty, is removed.
func TestDeadSupervisorsCgroupIsReclaimed(t *testing.T) {
	base := requireCgroups(t)
	deadStat := deadProcess(t)
	self, _ := procstat.Self()
	ns := self.PIDNS
	name := func(ns uint64, pid int, start uint64, seq int) string {
		return fmt.Sprintf("%s%d-%d-%d-%d", cgroupPrefix, ns, pid, start, seq)
	}

	orphanDir := filepath.Join(base, name(ns, deadStat.Pid, deadStat.Start, 1))
	liveDir := filepath.Join(base, name(ns, os.Getpid(), self.Start, 999999))
	// A live leaderrun in another PID namespace: its pid means nothing
	// here, whatever process has that number in this namespace.
	foreignDir := filepath.Join(base, name(ns+1, deadStat.Pid, deadStat.Start, 2))
	foreignDeadDir := filepath.Join(base, name(ns+1, deadStat.Pid, deadStat.Start, 3))
	for _, d := range []string{orphanDir, liveDir, foreignDir, foreignDeadDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(liveDir); os.Remove(foreignDir); os.Remove(foreignDeadDir) })
	lock, err := lockCgroup(foreignDir) // as its live leaderrun does
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lock)
	orphan := exec.Command("sleep", "300")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill() })
	if err := os.WriteFile(filepath.Join(orphanDir, "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	removeDeadCgroups(base, slog.New(slog.DiscardHandler))

	// Another leaderrun starting on this machine (a test running beside
	// this one) may have locked a dead cgroup first and be reclaiming it:
	// what must happen is that it goes, whoever removes it.
	// This package's reaper may reap the process: gone or a zombie both
	// mean dead.
	waitFor(t, "the process in a dead supervisor's cgroup to be killed", func() bool {
		st := procState(orphan.Process.Pid)
		return st == "" || st == "Z"
	})
	waitFor(t, orphanDir+", a dead supervisor's cgroup, to be removed", func() bool { return noFile(orphanDir) })
	if _, err := os.Stat(liveDir); err != nil {
		t.Errorf("a live supervisor's cgroup was removed: %v", err)
	}
	if _, err := os.Stat(foreignDir); err != nil {
		t.Errorf("the cgroup of a live supervisor in another PID namespace was removed: %v", err)
	}
	waitFor(t, "the empty cgroup of a dead supervisor in another PID namespace to be removed", func() bool { return noFile(foreignDeadDir) })
}

// noFile reports whether nothing is at path.
func noFile(path string) bool {
	_, err := os.Stat(path)
	return os.IsNotExist(err)
}

func TestParseCgroupName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ns    uint64
		pid   int
		start uint64
		ok    bool
	}{
		{"leaderrun-4026531836-123-456-7", 4026531836, 123, 456, true},
		{"leaderrun-123-probe", 0, 0, 0, false},
		{"leaderrun-123-456-7", 0, 0, 0, false}, // no namespace
		{"leaderrun-1-0-456-7", 0, 0, 0, false},
		{"leaderrun-1--1-456-7", 0, 0, 0, false},
		{"leaderrun-1-99999999-456-7", 0, 0, 0, false},
		{"leaderrun-1-123-456-7-8", 0, 0, 0, false},
		{"leaderrun-1-x-456-7", 0, 0, 0, false},
		{"system.slice", 0, 0, 0, false},
		{"leaderrun-1-123-456-", 0, 0, 0, false},
	} {
		ns, pid, start, ok := parseCgroupName(tc.name)
		if ns != tc.ns || pid != tc.pid || start != tc.start || ok != tc.ok {
			t.Errorf("parseCgroupName(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", tc.name, ns, pid, start, ok, tc.ns, tc.pid, tc.start, tc.ok)
		}
	}
}

// TestEveryStartReclaimsDeadSupervisorsCgroups plays a follower on the
// same host that takes a name over from a leaderrun SIGKILLed after this
// one started its first child: before it starts its next child, what the
// dead one's command left in its cgroup (an escapee) is killed.
func TestEveryStartReclaimsDeadSupervisorsCgroups(t *testing.T) {
	base := requireCgroups(t)
	first := startHelper(t, Spec{}, "exit", "0")
	<-first.Done()
	orphan := deadSupervisorsOrphan(t, base)

	ready := filepath.Join(t.TempDir(), "ready")
	next := startHelper(t, Spec{}, "sleep", ready)
	waitFile(t, ready)
	defer next.Stop()
	if st := procState(orphan); st != "" && st != "Z" {
		t.Errorf("the dead supervisor's escapee is alive (state %s) when the next child runs", st)
	}
}

// A Start after a proved takeover (Spec.Proved) leaves the reclaim to the
// next Start: it is off the new command's way.
func TestProvedStartLeavesReclaimToTheNext(t *testing.T) {
	base := requireCgroups(t)
	first := startHelper(t, Spec{}, "exit", "0")
	<-first.Done()
	orphan := deadSupervisorsOrphan(t, base)

	ready := filepath.Join(t.TempDir(), "ready")
	proved := startHelper(t, Spec{Proved: true}, "sleep", ready)
	waitFile(t, ready)
	defer proved.Stop()
	if st := procState(orphan); st == "" || st == "Z" {
		t.Fatalf("a proved Start reclaimed the dead supervisor's cgroup (its escapee's state %q)", st)
	}
	second := startHelper(t, Spec{}, "exit", "0")
	<-second.Done()
	if st := procState(orphan); st != "" && st != "Z" {
		t.Errorf("the dead supervisor's escapee is alive (state %s) after the next Start", st)
	}
}

// deadSupervisorsOrphan makes, under base, the cgroup of a leaderrun that
// died, with a process in it, and returns that process's pid.
func deadSupervisorsOrphan(t *testing.T, base string) int {
	t.Helper()

	deadStat := deadProcess(t)
	self, _ := procstat.Self()
	orphanDir := filepath.Join(base, fmt.Sprintf("%s%d-%d-%d-1", cgroupPrefix, self.PIDNS, deadStat.Pid, deadStat.Start))
	if err := os.Mkdir(orphanDir, 0o755); err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command("sleep", "300")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { orphan.Process.Kill(); os.Remove(orphanDir) })
	if err := os.WriteFile(filepath.Join(orphanDir, "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	go orphan.Wait() // reap it once killed
	return orphan.Process.Pid
}

// TestStopKillsEscapedGrandchildThroughItsCgroup: a grandchild that left
// the child's process group and session is dead and reaped when Stop
// returns; with a cgroup of its own, Stop does not sweep /proc, so
// cgroup.kill is what kills it.
func TestStopKillsEscapedGrandchildThroughItsCgroup(t *testing.T) {
	requireCgroups(t)
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	c := startHelper(t, Spec{KillGrace: 300 * time.Millisecond}, "escape", pidfile)
	grandchild := readPid(t, pidfile)
	waitFile(t, pidfile+".grandchild-ready")
	if c.cg == nil {
		t.Fatal("no cgroup for the child")
	}
	if sid, err := unix.Getsid(grandchild); err != nil || sid != grandchild {
		t.Fatalf("grandchild %d: session %d, %v; want its own session", grandchild, sid, err)
	}
	st, _ := stopWithin(t, c)
	if got, want := st, (Status{Signal: syscall.SIGTERM}); got != want {
		t.Errorf("Stop() = %v, want %v", got, want)
	}
	if !gone(grandchild) {
		t.Errorf("escaped grandchild %d still exists after Stop", grandchild)
	}
}
