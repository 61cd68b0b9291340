package supervise

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/leaderrun/leaderrun/signals"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// Status is how a child ended: with an exit code, or killed by a signal.
type Status struct {
	Code   int            // exit code; 0 when Signal is set
	Signal syscall.Signal // the signal that killed the child, or 0
	// Killed reports that the child outlived its stop signal's kill grace
	// and died by the SIGKILL that Stop sent then: not a signal to pass
	// on as the child's own end.
	Killed bool
}

// String returns "exit status 3", "killed by SIGTERM" or "killed by
// SIGKILL after the kill grace".
func (s Status) String() string {
	if s.Killed {
		return "killed by " + signals.Name(s.Signal) + " after the kill grace"
	}
	if s.Signal != 0 {
		return "killed by " + signals.Name(s.Signal)
	}
	return fmt.Sprintf("exit status %d", s.Code)
}

// ExitCode returns the child's exit code, or 128+S when signal S killed it,
// as a shell reports it.
func (s Status) ExitCode() int {
	if s.Signal != 0 {
		return 128 + int(s.Signal)
	}
	return s.Code
}

// IsInit reports whether this process is PID 1, as in a container.
func IsInit() bool { return os.Getpid() == 1 }

// Reraise kills this process with the signal that killed the child, so that
// our parent sees the same status. It does nothing when the child exited
// normally, when this process is PID 1 (the kernel does not deliver default
// signals to init), or when s.Signal is not one a process can die by (see
// canEnd: a stop signal would stop this process instead); the caller then
// exits with s.ExitCode(). Reraise returns only if the signal did not kill
// us.
func Reraise(s Status) {
	if s.Signal == 0 || IsInit() || !canEnd(s.Signal) {
		return
	}
	signal.Reset(s.Signal)
	// The Go runtime keeps its own handler after Reset, and that handler
	// ignores or traps many signals (USR1, QUIT, SEGV...) instead of dying
	// by them. Restore the kernel's default action and raise the signal on
	// this thread, where it is not blocked.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setDefaultAction(s.Signal)
	var set unix.Sigset_t
	addSignal(&set, s.Signal)
	_ = unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), s.Signal)
	time.Sleep(100 * time.Millisecond) // let delivery to another thread finish
}

// setDefaultAction sets the disposition of sig to SIG_DFL with rt_sigaction.
// An all-zero struct sigaction means SIG_DFL, no flags and an empty mask on
// every Linux architecture; the buffer is larger than any of them.
func setDefaultAction(sig syscall.Signal) {
	var act [64]byte
	const sigsetSize = 8 // sizeof(kernel sigset_t) on all but mips
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig),
		uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0)
}

// addSignal adds sig to set; a number outside the set (not 1–64 on
// Linux) is left out.
var addSignal = nsinit.AddSignal

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

// canEnd reports whether a process can be killed by sig: a signal from 1
// to 64 whose default action ends the process. A stop signal (SIGSTOP,
// SIGTSTP, SIGTTIN, SIGTTOU) stops it instead, SIGCONT continues it, and
// SIGCHLD, SIGURG and SIGWINCH are ignored by default: no wait status
// says "killed by" any of them.
func canEnd(sig syscall.Signal) bool {
	if sig < 1 || sig > maxSignal {
		return false
	}
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		return false
	}
	return true
}
