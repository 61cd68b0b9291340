package nsinit

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// At a terminal the init is never the foreground job itself: the command
// starts in a background group; when the terminal stops it (it read the
// terminal or changed its modes), the init hands the terminal to the
// command's group if the init's own group has it, and otherwise reports the
// stop to the supervisor, which hands the terminal to the init's group and
// continues it; the SIGCONT that the supervisor passes on makes the init
// hand the terminal on in turn. A Ctrl-Z stop takes the terminal back and is
// reported too, so that the supervisor stops with the command. This is what
// supervise does for a command outside a namespace (see its tty.go), from
// the init's one goroutine.

// terminal is the controlling terminal on the init's stdin.
type terminal struct{ fd int }

// newTerminal returns the terminal on stdin, or nil unless it is this
// process's controlling terminal.
func newTerminal() *terminal {
	// TIOCGPGRP fails with ENOTTY unless fd 0 is our controlling terminal.
	if _, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil {
		return nil
	}
	return &terminal{fd: 0}
}

// foreground reports whether this process's group is the terminal's
// foreground group.
func (t *terminal) foreground() bool {
	fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}

// setForeground makes pgrp the terminal's foreground group. From a
// background group that raises SIGTTOU, which would stop the init: it is
// blocked on this thread (locked by Run) around the ioctl.
func (t *terminal) setForeground(pgrp int) error {
	var set, old unix.Sigset_t
	AddSignal(&set, syscall.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgrp)
	unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return err
}

// AddSignal adds sig to set; a number outside the set (not 1–64 on
// Linux) is left out.
func AddSignal(set *unix.Sigset_t, sig syscall.Signal) {
	bits := uint(unsafe.Sizeof(set.Val[0]) * 8)
	n := uint(sig) - 1
	if sig < 1 || n/bits >= uint(len(set.Val)) {
		return
	}
	set.Val[n/bits] |= 1 << (n % bits)
}

// giveTerminal makes the command's group the foreground job if the command
// waits for the terminal and the init's group has it.
func (c *command) giveTerminal() bool {
	if c.tty == nil || !c.ttyWants || !c.tty.foreground() {
		return false
	}
	if c.tty.setForeground(c.pid) != nil {
		return false
	}
	c.ttyWants, c.ttyHolds = false, true
	return true
}

// reclaimTerminal takes the terminal back from the command's group when
// that group still has it, or when the group that has it is empty. wantBack
// says whether the command is to get it again on SIGCONT.
func (c *command) reclaimTerminal(wantBack bool) {
	if c.tty == nil || !c.ttyHolds {
		return
	}
	c.ttyHolds, c.ttyWants = false, wantBack
	fg, err := unix.IoctlGetInt(c.tty.fd, unix.TIOCGPGRP)
	if err != nil {
		return
	}
	if fg != c.pid && (fg <= 0 || unix.Kill(-fg, 0) != unix.ESRCH) {
		return // someone else has it
	}
	c.tty.setForeground(unix.Getpgrp())
}

// jobStopped handles a stop of the command by sig.
func (c *command) jobStopped(sig syscall.Signal) {
	if c.tty == nil {
		return
	}
	switch sig {
	case syscall.SIGTTIN, syscall.SIGTTOU:
		c.ttyWants = true
		if c.giveTerminal() {
			c.signal(syscall.SIGCONT)
			return
		}
	case syscall.SIGTSTP:
		if !c.ttyHolds {
			return // not the terminal's stop: whoever sent it deals with it
		}
		c.reclaimTerminal(true)
	default:
		return // SIGSTOP: sent by the init or by hand, not by the terminal
	}
	// The command stopped as a job stops: the supervisor stops with it, so
	// that the shell sees the job stopped and its fg resumes both.
	if c.stops >= 0 {
		unix.Write(c.stops, []byte{byte(sig)})
	}
}
