package chaos

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each known defect (knownDefects) has a deterministic reproduction here.
// While the defect behaves as documented, the test logs it and passes
// (fails with -chaos.strict); when its behaviour changes — fixed, or worse —
// the test fails, so that knownDefects, its documentation (L1: docs/stores/sqlite.md) and
// the test are updated together.

func reportKnown(t *testing.T, id, format string, args ...any) {
	t.Helper()
	if *flagStrict {
		t.Errorf("KNOWN DEFECT "+id+": "+format, args...)
		return
	}
	t.Logf("KNOWN DEFECT "+id+" reproduced (reported, not failed; -chaos.strict fails): "+format, args...)
}

func fixedKnown(t *testing.T, id string) {
	t.Helper()
	t.Errorf("known defect %s no longer reproduces as documented: update knownDefects, its documentation (docs/stores/sqlite.md for L1) and this test", id)
}

// D1: with --pid-namespace=false, SIGKILL of leaderrun kills the child
// (Pdeathsig) but not a grandchild that left the child's process group
// with setsid; it is adopted by the nearest subreaper (here the test) or
// init and runs on. (As root, the next leaderrun to start a command on
// the host kills it from the child's cgroup before that command starts, so
// it never overlaps a successor there; none starts here.)
func TestKnownDefectD1EscapedGrandchildSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	left, rep := sigkillWithEscapee(t, "LEADERRUN_PID_NAMESPACE=false")
	for _, p := range left {
		switch p.what {
		case "child":
			t.Errorf("child %d alive 2s after SIGKILL of its leaderrun: Pdeathsig did not fire", p.pid)
		case "grandchild":
			reportKnown(t, "D1", "grandchild %d (setsid) alive 2s after SIGKILL of leaderrun %d, adopted by pid %d",
				p.pid, rep.pid, ppidOf(p.pid))
		}
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if len(left) == 0 {
		// As root with cgroup v2, any leaderrun that starts on this host
		// meanwhile (other runs of this package) kills what a dead
		// leaderrun's command left in its cgroup: D1 is then masked.
		t.Log("D1 not reproduced this time: the escaped grandchild was killed (another leaderrun starting on this host reclaims a dead leaderrun's cgroup)")
	}
}

// In the default mode (the child in a PID namespace of its own), nothing
// of the child's tree survives a SIGKILL of leaderrun: D1 is gone.
func TestNoOrphanAfterSIGKILLByDefault(t *testing.T) {
	t.Parallel()
	left, rep := sigkillWithEscapee(t, "LEADERRUN_PID_NAMESPACE=true")
	for _, p := range left {
		t.Errorf("%s %d alive 2s after SIGKILL of leaderrun %d (adopted by pid %d)", p.what, p.pid, rep.pid, ppidOf(p.pid))
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// sigkillWithEscapee SIGKILLs the leaderrun of a one-replica cluster
// (replicas' environment plus env) whose child started a grandchild in a
// session of its own, and returns what of the two is alive 2s later.
func sigkillWithEscapee(t *testing.T, env ...string) ([]proc, *replica) {
	c := newClusterEnv(t, "sqlite", 1, 0, env...)
	lead, rep, ok := c.waitLeader(leaderWait)
	if !ok {
		t.Fatal("no leader")
	}
	rd := &round{token: lead.token}
	if !c.arm(rd, armEscape) {
		t.Fatal(rd.skipped)
	}
	rep.signal(syscall.SIGKILL)
	if !rep.waitExit(5 * time.Second) {
		t.Fatal("leaderrun did not die of SIGKILL")
	}
	child := proc{lead.pid, uint64(lead.int("stime")), "child", lead.token}
	if child.pid == 0 || rd.gchild.pid == 0 {
		t.Fatalf("the child (%d) or grandchild (%d) was not seen alive", child.pid, rd.gchild.pid)
	}
	return awaitGone([]proc{child, rd.gchild}, 2*time.Second), rep
}

// A replica whose tenure was lost (here: its store connection blackholed)
// stops its child, then tries to release the lease; a SIGTERM that arrives
// during that release must make it exit 0, as a standby: it had no child
// left to stop. (Regression test for D2, fixed: it used to exit with the
// dead child's status, dying by SIGKILL for a child that ignored SIGTERM.)
func TestStopDuringReleaseAfterLostTenureExitsZero(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "postgres", 1, 0)
	lead, rep, ok := c.waitLeader(leaderWait)
	if !ok {
		t.Fatal("no leader")
	}
	rd := &round{token: lead.token}
	if !c.arm(rd, armIgnoreTerm) {
		t.Fatal(rd.skipped)
	}
	c.proxies[0][0].Blackhole()
	defer c.proxies[0][0].Pass()
	limit := c.timing.deadline + c.timing.grace + 5*time.Second
	if !awaitLogMsg(rep.logPath, "command stopped", limit) {
		t.Fatalf("no \"command stopped\" within %v of the blackhole:\n%s", limit, replicaLogTail(rep.logPath, 20))
	}
	child := proc{lead.pid, uint64(lead.int("stime")), "child", lead.token}
	if left := alive([]proc{child}); len(left) > 0 {
		t.Fatalf("child %d alive after \"command stopped\"", child.pid)
	}
	rep.signal(syscall.SIGTERM)
	if !rep.waitExit(10 * time.Second) {
		t.Fatal("leaderrun did not exit within 10s of SIGTERM")
	}
	if rep.status != "exit status 0" {
		t.Errorf("leaderrun exited %q, want \"exit status 0\"; log:\n%s", rep.status, replicaLogTail(rep.logPath, 20))
	}
}

// awaitGone waits up to d for every process in ps to end and returns those
// still alive.
func awaitGone(ps []proc, d time.Duration) []proc {
	deadline := time.Now().Add(d)
	for {
		left := alive(ps)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ppidOf(pid int) int {
	st, _ := procStat(pid)
	return st.ppid
}

// awaitLogMsg waits up to d for a replica's JSON log to have a line with
// msg.
func awaitLogMsg(path, msg string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		data, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(data), "\n") {
			var l struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
