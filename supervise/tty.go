package supervise

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"

	"github.com/leaderrun/leaderrun/signals"
)

// At a terminal the child starts in a background process group: this
// process stays the foreground job, so that the terminal's Ctrl-C, Ctrl-\
// and Ctrl-Z reach it whatever the command does with them. When the command
// reads from the terminal or changes its modes, the kernel stops it with
// SIGTTIN or SIGTTOU; then, if this process is the terminal's foreground
// job, the command's group becomes the foreground job and is continued, as
// a shell's fg does, so that an interactive command works as it does
// without leaderrun. From then on the terminal's keys go to the command.
// When Ctrl-Z stops it, this process takes the terminal back and stops
// too (Suspend, which freezes every command's whole tree first), so that
// the shell sees the job stopped; the SIGCONT of the shell's fg, passed on
// through Signal, hands the terminal to the command again.
// When the command ends, this process takes the terminal back.
//
// A namespace's init (package nsinit) is never the foreground job itself:
// it reports its command's job-control stops to leaderrun outside through a
// pipe (readStops), and leaderrun, if it is the foreground job, hands the
// terminal to the init's group and continues it; the init then hands it to
// its command in turn.

// terminal is what a Child knows of the terminal on its stdin. Its methods
// are safe for concurrent use.
type terminal struct {
	fd int

	mu    sync.Mutex // guards wants and holds
	wants bool       // the child waits, stopped, for the terminal
	holds bool       // the child's group was made the foreground group
}

// newTerminal returns the terminal of f, or nil unless f is this process's
// controlling terminal.
func newTerminal(f *os.File) *terminal {
	fd := int(f.Fd())
	// TIOCGPGRP fails with ENOTTY unless fd is our controlling terminal.
	if _, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil {
		return nil
	}
	runtime.KeepAlive(f)
	return &terminal{fd: fd}
}

// foreground reports whether this process's group is the foreground group
// of the terminal.
func (t *terminal) foreground() bool {
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}

// setForeground makes pgrp the terminal's foreground group. From a
// background group that raises SIGTTOU, which would stop this process: the
// signal is blocked on the calling thread around the ioctl instead of
// ignored, so that no child inherits SIG_IGN.
func (t *terminal) setForeground(pgrp int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set, old unix.Sigset_t
		addSignal(&set, syscall.SIGTTOU)
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
			errc <- err
			return
		}
		err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgrp)
		unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
		errc <- err
	}()
	return <-errc
}

// giveTerminal makes the child's group the foreground job if the child
// waits for the terminal and this process is the foreground job. It
// reports whether it did.
func (c *Child) giveTerminal() bool {
	t := c.tty
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.wants || !t.foreground() {
		return false
	}
	if err := t.setForeground(c.pid); err != nil {
		c.logger.Warn("cannot give the terminal to the command", "pid", c.pid, "err", err)
		return false
	}
	t.wants, t.holds = false, true
	return true
}

// reclaimTerminal takes the terminal back from the child's group when that
// group still has it, or when the group that has it is empty (a namespace
// whose init died with the terminal in its command's hands). wantBack says
// whether the child is to get it again on SIGCONT.
func (c *Child) reclaimTerminal(wantBack bool) {
	t := c.tty
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.holds {
		return
	}
	t.holds, t.wants = false, wantBack
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	if err != nil {
		return
	}
	if fg != c.pid && (fg <= 0 || unix.Kill(-fg, 0) != unix.ESRCH) {
		return // someone else has it (a shell that put us in the background)
	}
	if err := t.setForeground(unix.Getpgrp()); err != nil {
		c.logger.Warn("cannot take back the terminal", "err", err)
	}
}

// jobStopped handles a stop of the child by sig, which the reaper saw (or,
// for a namespace's init, the init reported). It runs without the reaper's
// mutex.
func (c *Child) jobStopped(sig syscall.Signal) {
	t := c.tty
	if t == nil {
		return
	}
	switch sig {
	case syscall.SIGTTIN, syscall.SIGTTOU:
		t.mu.Lock()
		t.wants = true
		t.mu.Unlock()
		if c.giveTerminal() {
			c.logger.Info("the command uses the terminal; it is now the terminal's foreground job", "pid", c.pid)
			c.signal(syscall.SIGCONT)
			return
		}
		if c.otherChildHasTerminal() {
			return // it waits, as a background job does, for its turn
		}
	case syscall.SIGTSTP:
		t.mu.Lock()
		holds := t.holds
		t.mu.Unlock()
		if !holds {
			return // not the terminal's stop: whoever sent it deals with it
		}
		c.reclaimTerminal(true)
	default:
		return // SIGSTOP: sent by this process or by hand, not by the terminal
	}
	// The command stopped as a job stops: stop with it, so that the shell
	// sees the job stopped and its fg resumes both; with every command's
	// whole tree frozen meanwhile, since the command may have stopped
	// itself (kill -TSTP $$) and left a descendant running.
	c.logger.Info("the command stopped at the terminal; stopping with it, its whole tree frozen", "pid", c.pid, "signal", signals.Name(sig))
	Suspend()
}

// otherChildHasTerminal reports whether the terminal's foreground group is
// another live Child's.
func (c *Child) otherChildHasTerminal() bool {
	fg, err := unix.IoctlGetInt(c.tty.fd, unix.TIOCGPGRP)
	if err != nil || fg == c.pid {
		return false
	}
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	return theReaper.isLive(fg)
}

// passStops gives a namespace's init, about to be forked with attr, the
// write end of a pipe on which it reports its command's stops, and returns
// the read end (nil when the child has no terminal).
func (c *Child) passStops(attr *syscall.ProcAttr) (r, w *os.File) {
	if c.tty == nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		c.logger.Warn("a command in a PID namespace cannot get the terminal", "err", err)
		return nil, nil
	}
	attr.Env = append(attr.Env[:len(attr.Env):len(attr.Env)], nsinit.StopsEnv+"="+strconv.Itoa(len(attr.Files)))
	attr.Files = append(attr.Files, w.Fd())
	return r, w
}

// readStops handles the stops that the init reports on r until it exits.
func (c *Child) readStops(r *os.File) {
	defer r.Close()
	b := make([]byte, 1)
	for {
		if n, err := r.Read(b); n == 0 || err != nil {
			return
		}
		switch sig := syscall.Signal(b[0]); sig {
		case syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGTSTP:
			c.jobStopped(sig)
		}
	}
}
