package supervise

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ownsForeground reports whether this process's stdin is its controlling
// terminal and our process group is that terminal's foreground group. Only
// then does the child become the foreground job.
func ownsForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// reclaimForeground makes our process group the foreground group of the
// terminal on stdin again. Changing the foreground from a background group
// raises SIGTTOU, which would stop us; it is blocked on this thread around
// the ioctl instead of ignored, so children never inherit SIG_IGN. The
// caller must be locked to its OS thread.
func reclaimForeground() error {
	pgrp := unix.Getpgrp()
	if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && fg == pgrp {
		return nil
	}
	var set, old unix.Sigset_t
	addSignal(&set, syscall.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pgrp)
}
