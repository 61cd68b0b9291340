package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// unprivilegedUID runs TestFastUnprivileged's replicas: nobody.
const unprivilegedUID = 65534

// TestFastUnprivileged runs replicas as one unprivileged user (nobody) on
// one SQLite store. leaderrun makes itself non-dumpable, so such a
// follower cannot open anything under the leader's /proc/PID; the same-host
// fast path must work without that. A leader stopped by SIGTERM hands the
// name over at its end signal (the follower takes it at the stopping word
// and starts its command at the end), not through the store; a leader
// killed with SIGKILL is proved dead and its name taken at once. Leases
// last 60 s and every wait here gives up after 30 s: no expiry can pass.
func TestFastUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs replicas as another user: needs root")
	}
	// Under /tmp, not $TMPDIR: the user must reach it.
	dir, err := os.MkdirTemp("/tmp", "leaderrun-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	work := filepath.Join(dir, "work")
	for _, err := range []error{os.Chmod(dir, 0o755), os.Mkdir(work, 0o700), os.Chown(work, unprivilegedUID, unprivilegedUID)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "leaderrun") // TestMain runs leaderrun by this name
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	logOf := func(id string) string { return filepath.Join(work, id+".log") }
	start := func(id string) *exec.Cmd {
		t.Helper()
		c := exec.Command(prog, "--name", "relay", "--identity", id, "--ttl", "60s", "--log-level", "debug",
			"--store", "sqlite:"+filepath.Join(work, "leases.db"), "--", "sleep", "1000")
		// No XDG_RUNTIME_DIR (and no /run/user/65534): the end signals'
		// directory is leaderrun-65534 in TMPDIR.
		c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "TEST_STDERR=" + logOf(id)}
		c.Dir = work
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true,
			Credential: &syscall.Credential{Uid: unprivilegedUID, Gid: unprivilegedUID}}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		t.Cleanup(func() {
			c.Process.Kill()
			<-done
			if data, err := os.ReadFile(logOf(id)); err == nil {
				t.Logf("%s's log:\n%s", id, data)
			}
		})
		return c
	}
	a := start("a")
	awaitLog(t, logOf("a"), `msg="recorded where the command runs`)
	start("b")
	awaitLog(t, logOf("b"), `msg="watching the leader on this host`)

	if err := a.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, logOf("b"), `msg="elected; starting command"`)
	// b takes the name at a's end signal: while a's command stops, or,
	// when b looks only after, at once (never at the lease's expiry).
	awaitLog(t, logOf("b"), `msg="took over the lease (at once )?from the leader on this host, which (is stopping its command|ended its tenure)`+
		`[^"]*" .*leader=a(.|\n)*msg="elected; starting command"`)
	awaitLog(t, logOf("a"), `msg="tenure over; (a follower on this host took the name at our end signal|the lease was no longer ours to release)`)

	awaitLog(t, logOf("b"), `msg="recorded where the command runs`)
	start("c")
	awaitLog(t, logOf("c"), `msg="watching the leader on this host.* leader=b`)
	b := readPidOf(t, "b", logOf("b"))
	if err := syscall.Kill(b, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, logOf("c"), `msg="took over the lease from a dead leader on this host" .*dead_leader=b(.|\n)*msg="elected; starting command"`)
}

// readPidOf returns the pid of replica id, from the where its log records.
func readPidOf(t *testing.T, id, log string) int {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`recorded where the command runs.* where="v\d boot=\S+ pidns=\d+ pid=(\d+) `).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s's log records no where", id)
	}
	var pid int
	for _, c := range m[1] {
		pid = pid*10 + int(c-'0')
	}
	return pid
}

// awaitLog waits up to 30 s for the file log to match re.
func awaitLog(t *testing.T, log, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(log); err == nil && r.Match(data) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no match for %s within 30s", filepath.Base(log), re)
		}
	}
}
