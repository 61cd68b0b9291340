package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
	"github.com/leaderrun/leaderrun/internal/procstat"
	"golang.org/x/sys/unix"
)

// Where this process may create cgroups (cgroup v2, as root or in a
// systemd unit with Delegate=yes), each Child gets one of its own below
// this process's cgroup, named leaderrun-PIDNS-PID-START-SEQ after this
// process's PID namespace (inode), pid and start time. The child is cloned straight into it, so every
// descendant is in it whatever it does with its session, group or parent,
// and Stop ends with cgroup.kill: every process left, at once, with no race
// against a process that forks while /proc is swept. A cgroup whose
// leaderrun died (SIGKILL) is killed and removed by every later Start of any
// leaderrun in the same cgroup. Where cgroups cannot be created, nothing of
// this applies; the process group, the sweep and the PID namespace still do.

// cgroupPrefix begins the name of every cgroup this package creates.
const cgroupPrefix = "leaderrun-"

// cgroupBase is this process's cgroup directory when children may be put
// in cgroups of their own, else "".
var (
	cgroupBaseOnce sync.Once
	cgroupBase     string
	cgroupSeq      atomic.Uint64
)

// childCgroups returns the directory under which Start creates the
// children's cgroups, or "" when it cannot. With reclaim, it also kills
// and removes what dead leaderrun processes of this PID namespace left
// there: a follower that takes a name over from a leaderrun that died
// kills what that one's command left before it starts its own.
func childCgroups(logger *slog.Logger, reclaim bool) string {
	cgroupBaseOnce.Do(func() {
		dir, err := ownCgroupDir()
		if err != nil {
			logger.Debug("children get no cgroup of their own", "err", err)
			return
		}
		probe := filepath.Join(dir, fmt.Sprintf("%s%d-probe", cgroupPrefix, os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			logger.Debug("children get no cgroup of their own", "err", err)
			return
		}
		os.Remove(probe)
		cgroupBase = dir
	})
	if cgroupBase != "" && reclaim {
		removeDeadCgroups(cgroupBase, logger)
	}
	return cgroupBase
}

// ownCgroupDir returns the directory of this process's cgroup in the
// cgroup v2 hierarchy.
func ownCgroupDir() (string, error) {
	rel, ok := cgroupv2.Of("self")
	if !ok {
		return "", errors.New("no cgroup v2 hierarchy")
	}
	root, err := cgroupv2.Root()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, rel)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return "", err
	}
	return dir, nil
}

// cgroup is one Child's cgroup.
type cgroup struct {
	dir string
	fd  int // open until the child has been cloned into it
}

// newCgroup creates a cgroup for a child under base.
func newCgroup(base string) (*cgroup, error) {
	self, err := procstat.Self()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, fmt.Sprintf("%s%d-%d-%d-%d", cgroupPrefix, self.PIDNS, self.Pid, self.Start, cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &cgroup{dir: dir, fd: fd}, nil
}

// cloned closes the descriptor the child was cloned with.
func (g *cgroup) cloned() {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
}

// kill kills every process in the cgroup and its descendant cgroups,
// waits until none is left, and removes them all. It reports how many
// processes it found, and gives up (leaving the cgroup) after
// cgroupKillWait, when a process will not die (uninterruptible sleep).
func (g *cgroup) kill() int {
	g.cloned()
	n := len(g.procs())
	if n > 0 {
		if err := os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			// Before Linux 5.14: one by one, until none is left.
			for _, pid := range g.procs() {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	deadline := time.Now().Add(cgroupKillWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := removeTree(g.dir)
		if err == nil || time.Now().After(deadline) {
			return n
		}
		for _, pid := range g.procs() {
			unix.Kill(pid, unix.SIGKILL)
		}
		theReaper.reap()
		time.Sleep(wait)
	}
}

// cgroupKillWait bounds how long kill waits for a cgroup to empty.
const cgroupKillWait = 10 * time.Second

// removeTree removes the cgroup dir and every cgroup below it, deepest
// first; a cgroup that still holds a process makes it fail with EBUSY.
func removeTree(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// procs lists the processes in the cgroup and the cgroups below it.
func (g *cgroup) procs() []int {
	var pids []int
	filepath.WalkDir(g.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeDeadCgroups kills and removes the cgroups under base that
// leaderrun processes no longer alive created: what a SIGKILLed leaderrun's
// children left. Only cgroups that leaderrun processes of this PID
// namespace created are considered: a pid means nothing in another.
//
// It reads each leaderrun's /proc entry once, however many cgroups that
// one has: with several replicas on a host, each owning many partitions,
// base holds hundreds of cgroups of a few processes.
func removeDeadCgroups(base string, logger *slog.Logger) {
	self, err := procstat.Self()
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(base)
	live := map[[2]uint64]bool{} // by pid and start time
	for _, e := range entries {
		pidns, pid, start, ok := parseCgroupName(e.Name())
		if !ok || !e.IsDir() || pidns != self.PIDNS || pid == self.Pid {
			continue
		}
		id := [2]uint64{uint64(pid), start}
		alive, seen := live[id]
		if !seen {
			st, err := procstat.Read(pid)
			alive = err == nil && st.Start == start && st.State != 'Z'
			live[id] = alive
		}
		if alive {
			continue // a live leaderrun's
		}
		g := &cgroup{dir: filepath.Join(base, e.Name()), fd: -1}
		if n := g.kill(); n > 0 {
			logger.Warn("killed what a leaderrun that died left running", "cgroup", g.dir, "processes", n)
		}
	}
}

// parseCgroupName reads the PID namespace, pid and start time from a name
// newCgroup made.
func parseCgroupName(name string) (pidns uint64, pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return 0, 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 {
		return 0, 0, 0, false
	}
	n := make([]uint64, 4)
	for i, s := range f {
		var err error
		if n[i], err = strconv.ParseUint(s, 10, 64); err != nil {
			return 0, 0, 0, false
		}
	}
	if n[1] == 0 || n[1] > 1<<22 {
		return 0, 0, 0, false
	}
	return n[0], int(n[1]), n[2], true
}

// ReclaimCgroups kills and removes what children of leaderrun processes
// that died (SIGKILL) left in cgroups of their own below this process's
// cgroup, and reports whether Start will give children cgroups of their
// own. Start does the same on its first call; a supervisor calls it at
// startup so that a standby reclaims them too.
func ReclaimCgroups(logger *slog.Logger) bool {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return childCgroups(logger, true) != ""
}
