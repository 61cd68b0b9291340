package nsinit

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A command starts with the signal mask and the ignored signals that the
// supervisor itself started with, as it would without leaderrun (nohup's
// ignored SIGHUP, a shell's ignored SIGINT for a background job, tini's
// sigconf test). The supervisor passes them in SignalsEnv (or ExecEnv),
// two hexadecimal masks, bit N-1 for signal N; the init applies them to
// the command it forks (Run), and a process started in ExecEnv's mode
// applies them to itself and execs the command (RunExec), for a command
// outside a namespace whose ignored signals the supervisor handles itself.

// SignalsEnv carries the command's starting signal state to the init:
// "IGNORED BLOCKED" (see SignalsValue).
const SignalsEnv = "LEADERRUN_INTERNAL_SIGNALS"

// ExecEnv makes the program, when it is not a namespace's init, set the
// signal state its value describes (as SignalsEnv's) and exec the command
// named by its arguments (os.Args[1] the path, os.Args[2:] its argv).
const ExecEnv = "LEADERRUN_INTERNAL_EXEC"

// Ignorable are the signals whose being ignored can be passed on: those
// whose disposition a Go program can read as it started with. At start,
// before any of a Go program's code runs, the runtime installs its own
// handler for every other signal, and keeps the disposition it replaced
// to itself; SIGCHLD ignored would also make the kernel reap the init's
// command behind its back.
const Ignorable = 1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGCONT-1) |
	1<<(syscall.SIGTSTP-1) | 1<<(syscall.SIGTTIN-1) | 1<<(syscall.SIGTTOU-1)

// SignalsValue returns the value of SignalsEnv or ExecEnv for a command
// that starts with the signals in ignored ignored and those in blocked
// blocked (bit N-1 for signal N).
func SignalsValue(ignored, blocked uint64) string {
	return strconv.FormatUint(ignored, 16) + " " + strconv.FormatUint(blocked, 16)
}

// parseSignals reads a SignalsValue; ok is false when it is malformed.
func parseSignals(v string) (ignored, blocked uint64, ok bool) {
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0, 0, false
	}
	ignored, err1 := strconv.ParseUint(f[0], 16, 64)
	blocked, err2 := strconv.ParseUint(f[1], 16, 64)
	return ignored & Ignorable, blocked, err1 == nil && err2 == nil
}

// signalState is the state a command starts with.
type signalState struct {
	ignored, blocked uint64
}

// takeSignals reads and unsets the variable name; the zero state when it
// is missing or malformed.
func takeSignals(name string) signalState {
	v := os.Getenv(name)
	os.Unsetenv(name)
	ignored, blocked, ok := parseSignals(v)
	if !ok {
		return signalState{}
	}
	return signalState{ignored, blocked}
}

// list returns the signals of mask.
func list(mask uint64) []os.Signal {
	var sigs []os.Signal
	for n := 1; n <= 64; n++ {
		if mask&(1<<(n-1)) != 0 {
			sigs = append(sigs, syscall.Signal(n))
		}
	}
	return sigs
}

// apply makes the calling thread, which must be locked, block what s
// blocks, and this process ignore what s ignores (signal.Ignore: the Go
// runtime then passes SIG_IGN on to a child, where it resets every
// signal it handles). It returns what undoes it: the thread's mask comes
// back, and the ignored signals go to c again (nil: they stay ignored).
func (s signalState) apply(c chan<- os.Signal) (undo func()) {
	var set, old unix.Sigset_t
	set.Val[0] = s.blocked
	unix.PthreadSigmask(unix.SIG_SETMASK, &set, &old)
	ignored := list(s.ignored)
	if len(ignored) > 0 {
		signal.Ignore(ignored...)
	}
	return func() {
		unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
		if c != nil && len(ignored) > 0 {
			signal.Notify(c, ignored...)
		}
	}
}

// IsExec reports whether this process was started in ExecEnv's mode. Such
// a process must call RunExec and exit with its result.
func IsExec() bool {
	_, _, ok := parseSignals(os.Getenv(ExecEnv))
	return ok && os.Getenv(Env) == ""
}

// RunExec sets the signal state that ExecEnv describes and execs the
// command named by its arguments, with the rest of its environment. It
// returns only when the exec failed: 127 when the command was not found,
// else 126, having said why.
func RunExec() int {
	s := takeSignals(ExecEnv)
	if len(os.Args) < 3 {
		os.Stderr.WriteString("leaderrun: bad arguments to start a command with its signal state\n")
		return 125
	}
	runtime.LockOSThread() // the exec keeps this thread's mask
	s.apply(nil)
	return startFailed(os.Args[1], syscall.Exec(os.Args[1], os.Args[2:], os.Environ()))
}
