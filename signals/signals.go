// Package signals says what leaderrun does with each signal it receives:
// which signals it forwards to its command, which stop the tenure, which it
// drops, and which it leaves to the kernel.
//
// Notify subscribes to an explicit list: never to every signal (the Go
// runtime sends itself SIGURG for preemption, and catching SIGTTIN or
// SIGTTOU would make a background write to a terminal loop), and nothing
// here calls signal.Ignore (a child would inherit SIG_IGN).
//
// A signal that another process sends with kill(2) is never a crash. The Go
// runtime treats SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV,
// SIGSTKFLT and SIGSYS as faults and ends the program with a stack dump
// (exit 2) unless they are subscribed to; subscribed, one sent by another
// process arrives on the channel like any other signal, while a real fault
// in leaderrun's own code still crashes it, as it must.
package signals

import (
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// Action is what leaderrun does with a signal it receives.
type Action int

const (
	// Kernel: leaderrun does not catch the signal; the kernel's default
	// action applies to leaderrun itself (KILL, STOP, TTIN, TTOU).
	Kernel Action = iota
	// Forward: relayed to the command's process group.
	Forward
	// Stop: ends the tenure as a shutdown does (see StopOn and PassOn).
	Stop
	// Suspend: the terminal's Ctrl-Z (TSTP): SIGSTOP to the command's
	// group, its whole tree frozen, then to leaderrun itself; SIGCONT
	// resumes both (see supervise.Suspend).
	Suspend
	// Ignore: caught and dropped.
	Ignore
)

func (a Action) String() string {
	switch a {
	case Kernel:
		return "kernel default"
	case Forward:
		return "forward"
	case Stop:
		return "stop"
	case Suspend:
		return "suspend"
	case Ignore:
		return "ignore"
	}
	return "Action(?)"
}

// Forwarded lists the signals leaderrun relays to its command's process
// group, unless StopOn makes one a stop signal. Every one of them may be
// named in --stop-on. Callers must not modify it.
var Forwarded = []os.Signal{
	syscall.SIGHUP,
	syscall.SIGINT,
	syscall.SIGQUIT,
	syscall.SIGILL,
	syscall.SIGTRAP,
	syscall.SIGABRT,
	syscall.SIGBUS,
	syscall.SIGFPE,
	syscall.SIGUSR1,
	syscall.SIGSEGV,
	syscall.SIGUSR2,
	syscall.SIGALRM,
	syscall.SIGTERM,
	syscall.SIGSTKFLT,
	syscall.SIGCONT,
	syscall.SIGVTALRM,
	syscall.SIGWINCH,
	syscall.SIGIO,
	syscall.SIGPWR,
	syscall.SIGSYS,
}

// Suspended is the terminal's Ctrl-Z. leaderrun does not forward it: it stops
// the command's group and then itself, as a job does (the command runs in
// the background of the terminal, see package supervise).
var Suspended os.Signal = syscall.SIGTSTP

// ignored are caught (by Notify, the reaper, or the Go runtime) and never
// forwarded: each reports on leaderrun's own state, not the command's.
var ignored = map[syscall.Signal]string{
	syscall.SIGPIPE: "a write to a closed pipe fails with EPIPE instead",
	syscall.SIGCHLD: "leaderrun reaps its children",
	syscall.SIGURG:  "the Go runtime's own preemption signal",
	syscall.SIGXCPU: "leaderrun's own CPU limit; the command gets its own",
	syscall.SIGXFSZ: "leaderrun's own file size limit; a write fails with EFBIG instead",
	syscall.SIGPROF: "the Go runtime's profiling timer",
}

// Base returns what leaderrun does with sig when StopOn does not name it.
func Base(sig syscall.Signal) Action {
	if sig == Suspended {
		return Suspend
	}
	if _, ok := ignored[sig]; ok {
		return Ignore
	}
	for _, f := range Forwarded {
		if f == sig {
			return Forward
		}
	}
	return Kernel
}

// IsStop reports whether sig ends an operator command (watch, step-down
// --wait): HUP, INT, QUIT or TERM, as a terminal sends them. What stops a
// run of a command is StopOn's business.
func IsStop(sig os.Signal) bool { return slices.Contains(stops, sig) }

// stops are the signals that a terminal, a service manager or kill(1)
// sends to end a program: HUP, INT, QUIT and TERM.
var stops = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// Notify relays every signal in Forwarded, and Suspended, and only those,
// to c. Like signal.Notify, it does not block sending to c: c should be
// buffered. Call it as early as the process can (package earlysig's init):
// until then a stop signal ends leaderrun, and a crash signal sent by
// another process ends it with a stack dump.
//
// It also subscribes to SIGPIPE, on a channel of its own that nobody reads:
// then a write to a closed pipe — leaderrun's stderr piped into `head -1`
// — fails with EPIPE instead of killing leaderrun in the middle of a
// tenure (the child would die by SIGKILL without its stop signal, and the
// lease would stay held). The child's disposition of SIGPIPE is the
// default, as exec resets handled signals.
func Notify(c chan<- os.Signal) {
	// The stop signals first: each signal's subscription waits for the
	// runtime's signal thread, and a stop signal ends the process until
	// its own is made.
	signal.Notify(c, stops...)
	signal.Notify(c, Forwarded...)
	signal.Notify(c, Suspended)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
