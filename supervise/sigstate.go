package supervise

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// A command starts with the signal mask and the ignored signals that this
// process started with, whatever this process does with those signals
// for itself, as it would without leaderrun: nohup's ignored SIGHUP, the
// SIGINT a shell ignores for a background job. They are read when this
// package is initialized, before main runs. Go's runtime has changed some
// of them by then, before any of the program's code runs, and keeps what
// they were to itself: it unblocks SIGHUP, SIGINT, SIGQUIT, SIGTERM, the
// fault signals (SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV,
// SIGSTKFLT, SIGSYS), SIGCHLD, SIGURG, SIGPROF and signals 32 to 34, and
// installs its own handler for every signal but SIGHUP, SIGINT, SIGCONT,
// SIGTSTP, SIGTTIN and SIGTTOU (nsinit.Ignorable). What it changed is
// lost: the command starts with those unblocked and not ignored.
//
// In a PID namespace the init applies them to the command (package
// nsinit). Without one, the command is forked from a thread that blocks
// what it is to block; and when this process handles a signal that the
// command is to ignore (the Go runtime resets every handled signal to its
// default in a child), the command is started through the init program in
// its exec mode (nsinit.ExecEnv), which sets the state and execs it.

// signalState is the signal state a command starts with: bit N-1 of each
// mask for signal N.
type signalState struct {
	ignored, blocked uint64
}

// startSignals is what this process started with, as far as it could be
// read (see above).
var startSignals = readSignalState()

// readSignalState returns which signals this process ignores and which the
// calling thread blocks.
func readSignalState() signalState {
	var s signalState
	for sig := syscall.Signal(1); sig <= maxSignal; sig++ {
		if disposition(sig) == sigIgn {
			s.ignored |= 1 << (sig - 1)
		}
	}
	var mask unix.Sigset_t
	if unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask) == nil {
		s.blocked = mask.Val[0]
	}
	return s
}

// sigIgn is the handler value SIG_IGN.
const sigIgn = 1

// disposition returns the handler of sig (0 SIG_DFL, 1 SIG_IGN, else a
// function) from rt_sigaction, or 0 when sig cannot be read. The handler
// is the first member of struct sigaction on every Linux architecture;
// the buffer is larger than the struct on any.
func disposition(sig syscall.Signal) uintptr {
	var old [64]byte
	const sigsetSize = 8 // sizeof(kernel sigset_t) on all but mips
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0,
		uintptr(unsafe.Pointer(&old)), sigsetSize, 0, 0)
	if errno != 0 {
		return 0
	}
	return *(*uintptr)(unsafe.Pointer(&old[0]))
}

// lostInFork reports whether a command forked by this process would not
// ignore all that s ignores: this process handles one of those signals
// now, and the Go runtime resets a handled signal to its default in the
// child.
func (s signalState) lostInFork() bool {
	for sig := syscall.Signal(1); sig <= maxSignal; sig++ {
		if s.ignored&(1<<(sig-1)) != 0 && disposition(sig) != sigIgn {
			return true
		}
	}
	return false
}

// value is s as nsinit.SignalsEnv and nsinit.ExecEnv carry it.
func (s signalState) value() string { return nsinit.SignalsValue(s.ignored, s.blocked) }

// blockOnThread makes the calling thread, which must be locked, block
// what s blocks, until the returned function runs: a process forked from
// it meanwhile starts with that mask.
func (s signalState) blockOnThread() (restore func()) {
	var set, old unix.Sigset_t
	set.Val[0] = s.blocked
	if unix.PthreadSigmask(unix.SIG_SETMASK, &set, &old) != nil {
		return func() {}
	}
	return func() { unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }
}

// prepareExec rewrites what run forks when the command must be started
// through the init program in its exec mode (see lostInFork): path and
// args become the init program's, the command's path and argv follow.
func (c *Child) prepareExec(path string, attr *syscall.ProcAttr, s signalState) (string, []string, error) {
	exe, argv0, err := initExecutable()
	if err != nil {
		return "", nil, err
	}
	attr.Env = append(attr.Env[:len(attr.Env):len(attr.Env)], nsinit.ExecEnv+"="+s.value())
	return exe, append([]string{argv0, path}, c.spec.Args...), nil
}
