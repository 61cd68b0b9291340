package supervise

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// holdCommand opens a pidfd of the command that c, the init of a PID
// namespace, runs, once the init has said which it is (readStarted), and
// holds it until the init is reaped (releaseCommand): the stop signal then
// goes to the command's group with no lookup on its way.
func (c *Child) holdCommand() {
	c.ns.readStarted()
	nspid := int(c.ns.command.Load())
	if nspid == 0 {
		return
	}
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	if !theReaper.isLive(c.pid) || c.cmd.held {
		return // until the reaper has the init, c.pid is the init's
	}
	if fd, pid := commandPidfd(c.pid, nspid); fd >= 0 {
		c.cmd.held, c.cmd.fd, c.cmd.pid = true, fd, pid
	}
}

// releaseCommand closes the pidfd that holdCommand opened, if it did.
func (c *Child) releaseCommand() {
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	if c.cmd.held {
		unix.Close(c.cmd.fd)
		c.cmd.held = false
	}
}

// signalCommandLocked sends sig to the group of the command that c, the
// init of a PID namespace, runs, from this process: the init's forwarding
// (its Go runtime's signal handler, then its loop) would first have to be
// scheduled, on a busy host about a millisecond of a hand-off. Like the
// init, it also signals the command itself if that left its group. It
// reports whether the signal went; false (no namespace, or no pidfd of the
// command held yet) leaves the signal to the init. theReaper.mu must be
// held.
func (c *Child) signalCommandLocked(sig syscall.Signal) bool {
	if !c.cmd.held || !theReaper.isLive(c.pid) {
		return false
	}
	fd, pid := c.cmd.fd, c.cmd.pid
	// The pidfd pins the process group's ID: a group of the same number
	// made after the command's end is another, and never signalled.
	sent := unix.PidfdSendSignal(fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP) == nil
	if pgid, err := unix.Getpgid(pid); err == nil && pgid != pid {
		sent = unix.PidfdSendSignal(fd, sig, nil, 0) == nil || sent
	}
	return sent
}

// commandPidfd returns a pidfd of the child of process init whose pid in
// init's PID namespace is nspid, and its pid here; -1 when init has no such
// child.
func commandPidfd(init, nspid int) (fd, pid int) {
	dir := "/proc/" + strconv.Itoa(init) + "/task/"
	for _, task := range tasks(dir) { // the init forks from whichever thread runs its loop
		b, err := procstat.ReadFile(dir + task + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			// Read through the pid once the pidfd holds it: a pid
			// reused since the list was read names another parent.
			if isChildWithNSPid(pid, init, nspid) {
				return fd, pid
			}
			unix.Close(fd)
		}
	}
	return -1, 0
}

// tasks lists the thread IDs in dir, a /proc/PID/task directory, with no
// more system calls than it takes (os.ReadDir tries the poller first).
func tasks(dir string) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// isChildWithNSPid reports whether process pid is a child of process parent
// with pid nspid in its own PID namespace.
func isChildWithNSPid(pid, parent, nspid int) bool {
	st, err := procstat.Read(pid)
	if err != nil || st.PPid != parent {
		return false
	}
	ids, err := procstat.NSPids(pid)
	return err == nil && len(ids) > 1 && ids[len(ids)-1] == nspid
}
