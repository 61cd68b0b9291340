package supervise

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

func itoa(n int) string { return strconv.Itoa(n) }

// TestReaperReapsOrphan runs a child that forks a grandchild and exits at
// once. The grandchild is adopted by this process (child subreaper); when it
// exits, the reaper must collect it so that no zombie remains.
func TestReaperReapsOrphan(t *testing.T) {
	dir := t.TempDir()
	pidfile, gofile := filepath.Join(dir, "grandchild"), filepath.Join(dir, "go")
	c := startHelper(t, Spec{}, "orphan", pidfile, gofile)
	grandchild := readPid(t, pidfile)
	if got, want := waitDone(t, c), (Status{}); got != want {
		t.Fatalf("child status = %v, want %v", got, want)
	}
	waitFor(t, "the grandchild to be adopted", func() bool {
		st, err := procstat.Read(grandchild)
		return err == nil && st.PPid == os.Getpid()
	})

	if err := os.WriteFile(gofile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan to be reaped", func() bool { return gone(grandchild) })
	for _, pid := range scanChildren(os.Getpid()) {
		if procState(pid) == "Z" {
			t.Errorf("zombie child %d remains", pid)
		}
	}
}

func TestListChildren(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	c := startHelper(t, Spec{}, "sleep", ready)
	waitFile(t, ready)
	found := func(pids []int) bool {
		for _, pid := range pids {
			if pid == c.Pid() {
				return true
			}
		}
		return false
	}
	if !found(listChildren()) {
		t.Errorf("listChildren() lacks child %d", c.Pid())
	}
	if !found(scanChildren(os.Getpid())) {
		t.Errorf("scanChildren() lacks child %d", c.Pid())
	}
}
