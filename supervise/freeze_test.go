package supervise

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
)

// TestSuspendFreezesTheWholeTree runs a supervisor (a helper process)
// whose command left a grandchild in a session of its own that ticks
// into a file, and makes it Suspend. While it is stopped, nothing of the
// tree runs: every process of it is stopped (SIGSTOP) or in a frozen
// cgroup. Continued, it asks Resumable first: yes, and the tree runs
// again; no, and the tree dies without having ticked again. In every
// mode: with a cgroup of the command's own or without, in a PID namespace
// or not.
func TestSuspendFreezesTheWholeTree(t *testing.T) {
	for _, ns := range []Namespace{NoNamespace, PIDNamespace} {
		for _, cg := range []bool{true, false} {
			for _, resumable := range []bool{true, false} {
				name := fmt.Sprintf("%v/cgroup=%t/resumable=%t", ns, cg, resumable)
				t.Run(name, func(t *testing.T) {
					if ns == PIDNamespace {
						requireNamespaces(t)
					}
					if cg && !ReclaimCgroups(nil) {
						t.Skip("no cgroups of their own for commands here")
					}
					testSuspend(t, ns, cg, resumable)
				})
			}
		}
	}
}

func testSuspend(t *testing.T, ns Namespace, cg, resumable bool) {
	dir := t.TempDir()
	sup := startHelper(t, Spec{}, "suspend-supervisor", dir, strconv.Itoa(int(ns)), strconv.FormatBool(cg))
	waitFile(t, filepath.Join(dir, "ticks"))
	waitFor(t, "the supervisor stopped", func() bool { return procState(sup.Pid()) == "T" })
	tree := descendants(sup.Pid())
	if len(tree) < 2 { // the command (and its init), its grandchild
		t.Fatalf("the supervisor's tree is %v, want the command and its grandchild", tree)
	}
	for _, pid := range tree {
		if !stoppedOrFrozen(pid) {
			t.Fatalf("process %d (%s) of the tree %v runs while its supervisor is stopped", pid, procState(pid), tree)
		}
	}
	ticks := size(filepath.Join(dir, "ticks"))
	if resumable {
		writeFile(filepath.Join(dir, "resumable"), "yes")
	}
	if err := syscall.Kill(sup.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "resumed"))
	if resumable {
		waitFor(t, "the tree to tick again", func() bool { return size(filepath.Join(dir, "ticks")) > ticks })
		return
	}
	// Dead, or, wrongly, ticking again.
	waitFor(t, "the tree to die", func() bool {
		for _, pid := range tree {
			if !gone(pid) && procState(pid) != "Z" {
				return size(filepath.Join(dir, "ticks")) > ticks
			}
		}
		return true
	})
	if got := size(filepath.Join(dir, "ticks")); got != ticks {
		t.Errorf("the tree ticked %d times after the supervisor was continued, its tenure over", got-ticks)
	}
}

// suspendSupervisor is the helper suspend-supervisor DIR NAMESPACE CGROUP:
// it runs "tree DIR" (a command whose grandchild ticks into DIR/ticks), in
// namespace NAMESPACE, in a cgroup of its own if CGROUP is true, resumable
// once DIR/resumable exists; then it suspends, and writes DIR/resumed
// once it was continued.
func suspendSupervisor(args []string) int {
	dir := args[0]
	ns, _ := strconv.Atoi(args[1])
	cg, _ := strconv.ParseBool(args[2])
	c, err := Start(Spec{
		Path:      os.Args[0],
		Args:      []string{os.Args[0], dir},
		Env:       helperEnviron(os.Environ(), "tree"),
		Namespace: Namespace(ns),
		noCgroup:  !cg,
		Resumable: func() bool { return exists(filepath.Join(dir, "resumable")) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	waitFileHelper(filepath.Join(dir, "ticking"))
	Suspend()
	writeFile(filepath.Join(dir, "resumed"), "yes")
	<-c.Done()
	c.Stop()
	return 0
}

// tickingTree is the helper tree DIR: a grandchild in a session of its
// own appends a byte to DIR/ticks every 2 ms and writes DIR/ticking once
// it started; this one sleeps.
func tickingTree(args []string) int {
	spawn("tick", args, &syscall.SysProcAttr{Setsid: true})
	time.Sleep(time.Hour)
	return 0
}

// tick is the helper tick DIR (see tickingTree).
func tick(args []string) int {
	name := filepath.Join(args[0], "ticks")
	appendFile(name, ".")
	writeFile(filepath.Join(args[0], "ticking"), "yes")
	for {
		time.Sleep(2 * time.Millisecond)
		appendFile(name, ".")
	}
}

// descendants lists the processes below pid.
func descendants(pid int) []int {
	kids := map[int][]int{}
	for _, p := range allProcs() {
		kids[p.PPid] = append(kids[p.PPid], p.Pid)
	}
	var out []int
	for stack := kids[pid]; len(stack) > 0; {
		p := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], kids[p]...)
		out = append(out, p)
	}
	return out
}

// stoppedOrFrozen reports whether process pid is stopped, or in a frozen
// cgroup.
func stoppedOrFrozen(pid int) bool {
	if procState(pid) == "T" {
		return true
	}
	rel, ok := cgroupv2.Of(strconv.Itoa(pid))
	root, err := cgroupv2.Root()
	if !ok || err != nil {
		return false
	}
	data, _ := os.ReadFile(filepath.Join(root, rel, "cgroup.events"))
	return strings.Contains(string(data), "frozen 1")
}

// size returns the size of file name, 0 if it cannot be read.
func size(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}
