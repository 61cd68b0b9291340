package samehost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// process is a pidfd on one process. Whatever it does reaches that process
// (or its process group), never a later one that reuses its pid.
type process struct {
	pid int
	f   *os.File // the pidfd, non-blocking, in the runtime's poller
}

// errOther marks a pid that names another process than the record's.
var errOther = errors.New("another process")

// identity is what openProcess checks of a process, besides its start
// time: its parent, and its command name (when not zero).
type identity struct {
	parent int
	comm   string
}

// openProcess opens a pidfd on pid and then checks that pid still has the
// start time start and the parent and command name that id asks for: the
// pidfd was opened before the check, so it names the process checked.
func openProcess(pid int, start uint64, id identity) (*process, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	st, err := procstat.Read(pid)
	switch {
	case err != nil:
		unix.Close(fd)
		return nil, err
	case st.Start != start:
		unix.Close(fd)
		return nil, fmt.Errorf("pid %d started at tick %d, not %d: %w", pid, st.Start, start, errOther)
	case id.parent != 0 && st.PPid != id.parent:
		unix.Close(fd)
		return nil, fmt.Errorf("pid %d is a child of %d, not of %d: %w", pid, st.PPid, id.parent, errOther)
	case id.comm != "" && st.Comm != id.comm:
		unix.Close(fd)
		return nil, fmt.Errorf("pid %d runs %q, not %q: %w", pid, st.Comm, id.comm, errOther)
	}
	return &process{pid: pid, f: os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))}, nil
}

func (p *process) Close() error { return p.f.Close() }

// lives checks that the process has not exited and that its pid still has
// the start time start: what was read by its pid since its pidfd was
// opened is the process's own.
func (p *process) lives(start uint64) error {
	if p.exited() {
		return fmt.Errorf("pid %d exited", p.pid)
	}
	st, err := procstat.Read(p.pid)
	switch {
	case err != nil:
		return err
	case st.Start != start:
		return fmt.Errorf("pid %d started at tick %d, not %d: %w", p.pid, st.Start, start, errOther)
	}
	return nil
}

// uid returns the process's effective user id (/proc/PID/status; the
// caller checks with lives that the pid was still the process's).
func (p *process) uid() (uint32, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if ids, ok := strings.CutPrefix(line, "Uid:"); ok {
			// real, effective, saved, filesystem
			if f := strings.Fields(ids); len(f) == 4 {
				u, err := strconv.ParseUint(f[1], 10, 32)
				return uint32(u), err
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no Uid line in its status", p.pid)
}

// signal sends sig to the process (0: check that it may be signalled).
func (p *process) signal(sig unix.Signal) error { return p.send(sig, 0) }

// signalGroup sends sig to every process of the process group that the
// process leads, by the group's identity rather than its number: the
// kernel finds the members through the process's struct pid, which stays
// the same after the process has exited and been reaped while members
// remain. ESRCH means the group has no member left, zombies included.
// It needs Linux 6.9; older kernels answer EINVAL.
func (p *process) signalGroup(sig unix.Signal) error {
	return p.send(sig, unix.PIDFD_SIGNAL_PROCESS_GROUP)
}

func (p *process) send(sig unix.Signal, flags int) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, flags) }); err != nil {
		return err
	}
	return serr
}

// wait blocks until the process has exited (a zombie has), or until ctx
// ends. It sleeps in the runtime's poller on the pidfd, which becomes
// readable when the process exits; a stopped process has not exited.
func (p *process) wait(ctx context.Context) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { p.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool { return exited(int(fd)) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("wait for pid %d: %w", p.pid, err)
	}
	return nil
}

// exited polls a pidfd without blocking.
func exited(fd int) bool {
	revents, ok := pollNow(fd, unix.POLLIN)
	return ok && revents != 0
}

// pollNow polls fd for events without blocking and returns what it
// reported; ok is false when poll failed or reported nothing.
func pollNow(fd int, events int16) (revents int16, ok bool) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: events}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		return pfd[0].Revents, err == nil && n > 0
	}
}

// exited reports whether the process has exited, without blocking.
func (p *process) exited() bool {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return false
	}
	done := false
	rc.Control(func(fd uintptr) { done = exited(int(fd)) })
	return done
}
