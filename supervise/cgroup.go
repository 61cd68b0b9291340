package supervise

import (
	"crypto/rand"
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
// against a process that forks while /proc is swept.
//
// While a leaderrun lives it holds an flock on each of its cgroups'
// directories (the lock goes with the process, however it dies). Every
// later Start of any leaderrun in the same cgroup, in whatever PID
// namespace, reclaims the cgroups below it that no live leaderrun holds
// and that this user owns: a dead leaderrun of its own PID namespace
// (found by pid and start time) has what it left killed and removed; one
// of another namespace, whose pid means nothing here, has its cgroup
// removed only once empty — a leaderrun that ran as PID 1 of a namespace
// and was SIGKILLed took its namespace's processes with it. Where cgroups
// cannot be created, nothing of this applies; the process group, the
// sweep and the PID namespace still do.

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
// children's cgroups, or "" when it cannot. With reclaim, it also
// reclaims what dead leaderrun processes left there (see
// removeDeadCgroups): a follower that takes a name over from a leaderrun
// that died kills what that one's command left before it starts its own.
func childCgroups(logger *slog.Logger, reclaim bool) string {
	cgroupBaseOnce.Do(func() {
		dir, err := ownCgroupDir()
		if err != nil {
			logger.Debug("children get no cgroup of their own", "err", err)
			return
		}
		// Not named by pid alone: leaderruns that are PID 1 of
		// namespaces of their own all have pid 1.
		b := make([]byte, 8)
		rand.Read(b)
		probe := filepath.Join(dir, fmt.Sprintf("%sprobe-%x", cgroupPrefix, b))
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
	// fd is the directory, open (close-on-exec) and locked with flock
	// from its creation until kill has removed it: the child is cloned
	// into it, and the lock tells other leaderruns that this one lives.
	// -1 for a cgroup this process did not create.
	fd int
}

// newCgroup creates a cgroup for a child under base, and locks it.
func newCgroup(base string) (*cgroup, error) {
	self, err := procstat.Self()
	if err != nil {
		return nil, err
	}
	for range 3 {
		dir := filepath.Join(base, fmt.Sprintf("%s%d-%d-%d-%d", cgroupPrefix, self.PIDNS, self.Pid, self.Start, cgroupSeq.Add(1)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		fd, err := lockCgroup(dir)
		if err == nil {
			// Another leaderrun's reclaim may have locked and
			// removed it, empty, before this one locked it.
			if _, err = os.Stat(dir); err == nil {
				return &cgroup{dir: dir, fd: fd}, nil
			}
			unix.Close(fd)
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, os.ErrNotExist) {
			os.Remove(dir)
			return nil, err
		}
		// A reclaim has it, and removes it: try another name.
	}
	return nil, errors.New("cgroups removed by other leaderruns as soon as made")
}

// lockCgroup opens dir and takes an exclusive flock on it without
// waiting; the error wraps EWOULDBLOCK when a live process holds one.
func lockCgroup(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return fd, nil
}

// unlock closes the cgroup's descriptor, which releases its lock.
func (g *cgroup) unlock() {
	if g.fd >= 0 {
		unix.Close(g.fd)
		g.fd = -1
	}
}

// kill kills every process in the cgroup and its descendant cgroups,
// waits until none is left, removes them all, and then unlocks it. It
// reports how many processes it found, and gives up (leaving the cgroup)
// after cgroupKillWait, when a process will not die (uninterruptible
// sleep).
func (g *cgroup) kill() int {
	defer g.unlock()
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
		err := cgroupv2.RemoveTree(g.dir)
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

// removeDeadCgroups reclaims the cgroups under base that leaderrun
// processes no longer alive created, and this user owns. A cgroup that a
// live leaderrun holds locked is never touched. Of the others, one that
// a leaderrun of this PID namespace created is killed and removed once
// that leaderrun (by pid and start time) is found dead: what a SIGKILLed
// leaderrun's children left. One of another namespace, where that pid
// means nothing, is removed only when no process is left in it.
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
		if !ok || !e.IsDir() || pidns == self.PIDNS && pid == self.Pid {
			continue
		}
		if pidns == self.PIDNS {
			id := [2]uint64{uint64(pid), start}
			alive, seen := live[id]
			if !seen {
				st, err := procstat.Read(pid)
				alive = err == nil && st.Start == start && st.State != 'Z'
				live[id] = alive
			}
			if alive {
				continue // a live leaderrun's (also one that locks nothing)
			}
		}
		g, ok := lockDeadCgroup(filepath.Join(base, e.Name()))
		if !ok {
			continue
		}
		switch {
		case pidns == self.PIDNS:
			if n := g.kill(); n > 0 {
				logger.Warn("killed what a leaderrun that died left running", "cgroup", g.dir, "processes", n)
			}
		case !populated(g.dir):
			if err := cgroupv2.RemoveTree(g.dir); err != nil {
				logger.Debug("cannot remove a dead leaderrun's empty cgroup", "cgroup", g.dir, "err", err)
			}
			g.unlock()
		default:
			g.unlock()
		}
	}
}

// lockDeadCgroup locks dir and returns it as a cgroup if no live process
// holds its lock and this user owns it.
func lockDeadCgroup(dir string) (*cgroup, bool) {
	fd, err := lockCgroup(dir)
	if err != nil {
		return nil, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return nil, false
	}
	return &cgroup{dir: dir, fd: fd}, true
}

// populated reports whether a process is in the cgroup dir or below it
// (true also when that cannot be read).
func populated(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return v != "0"
		}
	}
	return true
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
