package supervise

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// supervisePID1 is a leaderrun that runs as PID 1 of a PID namespace of
// its own (a container's ENTRYPOINT): it starts a child under Start, in a
// cgroup of its own, writes that cgroup's directory to file, and sleeps.
// With idle, the child exits at once and is not stopped: a live
// supervisor whose cgroup is empty.
func supervisePID1(file string, idle bool) int {
	nsinit.RemountProc()
	spec := Spec{Path: os.Args[0], Args: []string{os.Args[0], "0"}, Env: helperEnviron(os.Environ(), "exit")}
	ready := file + ".child-ready"
	if !idle {
		spec.Args, spec.Env = []string{os.Args[0], ready}, helperEnviron(os.Environ(), "sleep")
	}
	c, err := Start(spec)
	if err != nil {
		writeFile(file, "error: "+err.Error())
		return 2
	}
	if idle {
		<-c.Done()
	} else {
		waitFileHelper(ready)
	}
	if c.cg == nil {
		writeFile(file, "error: no cgroup")
		return 2
	}
	writeFile(file, c.cg.dir)
	time.Sleep(time.Hour)
	return 0
}

// startPID1Supervisor starts supervisePID1 as PID 1 of a new PID
// namespace and returns its pid (in this namespace) and its cgroup.
func startPID1Supervisor(t *testing.T, idle bool) (pid int, cgroup func() string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "cgroup")
	arg := "0"
	if idle {
		arg = "1"
	}
	cmd := exec.Command(os.Args[0], file, arg)
	cmd.Env = helperEnviron(os.Environ(), "supervise-pid1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid = cmd.Process.Pid
	t.Cleanup(func() { unix.Kill(pid, syscall.SIGKILL) })
	go cmd.Wait() // (or this package's reaper reaps it)
	return pid, func() string {
		t.Helper()
		dir := waitFile(t, file)
		if !strings.HasPrefix(dir, "/") {
			t.Fatalf("supervisor %d: %s", pid, dir)
		}
		return dir
	}
}

// TestDeadPID1SupervisorsEmptyCgroupsAreRemoved: twenty leaderruns, each
// PID 1 of a namespace of its own with its command in a cgroup of its
// own, are SIGKILLed: the kernel kills their namespaces, and leaves their
// cgroups empty. The next Start in this namespace removes all twenty; it
// leaves alone the empty cgroup of a live leaderrun in another namespace,
// and the cgroup of a live one with its command running. All of them are
// in the test binary's cgroup of its own: no other leaderrun on the host
// can do that Start's work.
func TestDeadPID1SupervisorsEmptyCgroupsAreRemoved(t *testing.T) {
	requireCgroups(t)
	requireNamespaces(t)
	_, idleCgroup := startPID1Supervisor(t, true)
	busyPid, busyCgroup := startPID1Supervisor(t, false)
	idleDir, busyDir := idleCgroup(), busyCgroup()

	const n = 20
	pids := make([]int, n)
	cgroups := make([]func() string, n)
	for i := range n {
		pids[i], cgroups[i] = startPID1Supervisor(t, false)
	}
	dead := make([]string, n)
	for i := range n {
		dead[i] = cgroups[i]()
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range pids {
		waitFor(t, "a SIGKILLed PID 1 to die with its namespace", func() bool {
			st := procState(pid)
			return st == "" || st == "Z"
		})
	}
	// The kernel empties a cgroup a moment after it has reaped the
	// processes that were in it.
	for _, dir := range dead {
		waitFor(t, dir+" to be empty", func() bool { return !populated(dir) })
	}

	next := startHelper(t, Spec{}, "exit", "0")
	waitDone(t, next)

	// In the test binary's cgroup of its own (enterTestCgroup), no other
	// leaderrun on the host reclaims them: the next Start alone must have.
	var left []string
	for _, dir := range dead {
		if !noFile(dir) {
			left = append(left, dir)
		}
	}
	for _, dir := range left {
		events, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		t.Logf("left: %s (%q, processes %v)", dir, events, (&cgroup{dir: dir}).procs())
	}
	if len(left) > 0 {
		t.Errorf("%d of the %d empty cgroups of dead leaderruns left after the next Start", len(left), n)
	}
	if _, err := os.Stat(idleDir); err != nil {
		t.Errorf("the empty cgroup of a live leaderrun in another namespace was removed: %v", err)
	}
	if _, err := os.Stat(busyDir); err != nil {
		t.Errorf("the cgroup of a live leaderrun in another namespace was removed: %v", err)
	}
	if procs := (&cgroup{dir: busyDir}).procs(); len(procs) == 0 {
		t.Errorf("the command of a live leaderrun %d in another namespace was killed", busyPid)
	}
}

// TestReclaimLeavesOtherUsersCgroups: an empty, unlocked cgroup named as
// a dead leaderrun's but owned by another user is not removed.
func TestReclaimLeavesOtherUsersCgroups(t *testing.T) {
	base := requireCgroups(t)
	if os.Geteuid() != 0 {
		t.Skip("only root can make a cgroup another user owns")
	}
	dir := filepath.Join(base, cgroupPrefix+"1-1-1-1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	removeDeadCgroups(base, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("another user's cgroup was removed: %v", err)
	}
}
