package cgrouptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
)

// TestEnterAndLeave: Enter puts this process, and so the processes it
// starts, in a new cgroup below its own; leave puts it back, kills what
// is left there and removes the cgroup.
func TestEnterAndLeave(t *testing.T) {
	before, ok := cgroupv2.Of("self")
	if !ok {
		t.Skip("no cgroup v2 hierarchy")
	}
	leave, err := Enter()
	if err != nil {
		t.Skipf("cannot make cgroups here: %v", err)
	}
	inside, _ := cgroupv2.Of("self")
	if filepath.Dir(inside) != before {
		leave()
		t.Fatalf("after Enter this process is in %s, want a cgroup right below %s", inside, before)
	}
	left := exec.Command("sleep", "300")
	if err := left.Start(); err != nil {
		leave()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	if got, _ := cgroupv2.Of(strconv.Itoa(left.Process.Pid)); got != inside {
		t.Errorf("a process started after Enter is in %s, want %s", got, inside)
	}
	leave()
	if got, _ := cgroupv2.Of("self"); got != before {
		t.Errorf("after leave this process is in %s, want %s", got, before)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("the process left in the cgroup exited 0; want it killed")
		}
	case <-time.After(10 * time.Second):
		left.Process.Kill()
		t.Error("the process left in the cgroup still runs after leave; want it killed")
	}
	root, _ := cgroupv2.Root()
	if _, err := os.Stat(filepath.Join(root, inside)); !os.IsNotExist(err) {
		t.Errorf("the cgroup %s is still there after leave (%v)", inside, err)
	}
}
