package chaos

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The test process is a child subreaper, so that a descendant orphaned by a
// replica's death is adopted here rather than by init: the suite can find
// it, and must reap it. os/exec waits for the replicas; the reaper waits
// only for the other children, so that it never steals a replica's status.
var theReaper reaper

type reaper struct {
	once sync.Once

	mu      sync.Mutex       // guards own; held while starting a replica
	own     map[int]struct{} // pids os/exec waits for
	adopted map[int]time.Time
}

// start makes this process a subreaper and starts reaping adopted zombies.
// It runs for the rest of the test binary's life.
func (r *reaper) start() {
	r.once.Do(func() {
		r.own = make(map[int]struct{})
		r.adopted = make(map[int]time.Time)
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
		go func() {
			for {
				r.reapAdopted()
				time.Sleep(50 * time.Millisecond)
			}
		}()
	})
}

// startCmd starts c and registers its pid as one os/exec waits for.
func (r *reaper) startCmd(c *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := c.Start(); err != nil {
		return err
	}
	r.own[c.Process.Pid] = struct{}{}
	return nil
}

// forget is called once os/exec has reaped pid.
func (r *reaper) forget(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.own, pid)
}

// reapAdopted reaps every zombie child of this process that os/exec does
// not wait for.
func (r *reaper) reapAdopted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pid := range children() {
		if _, ok := r.own[pid]; ok {
			continue
		}
		if _, ok := r.adopted[pid]; !ok {
			r.adopted[pid] = time.Now()
		}
		st, ok := procStat(pid)
		if ok && st.state != 'Z' {
			continue
		}
		var ws unix.WaitStatus
		if n, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); n == pid {
			delete(r.adopted, pid)
		}
	}
}

// children lists this process's children from /proc.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var pids []int
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
