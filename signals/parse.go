package signals

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// names maps Linux signal numbers to their names without the "SIG" prefix.
var names = map[syscall.Signal]string{
	syscall.SIGHUP:    "HUP",
	syscall.SIGINT:    "INT",
	syscall.SIGQUIT:   "QUIT",
	syscall.SIGILL:    "ILL",
	syscall.SIGTRAP:   "TRAP",
	syscall.SIGABRT:   "ABRT",
	syscall.SIGBUS:    "BUS",
	syscall.SIGFPE:    "FPE",
	syscall.SIGKILL:   "KILL",
	syscall.SIGUSR1:   "USR1",
	syscall.SIGSEGV:   "SEGV",
	syscall.SIGUSR2:   "USR2",
	syscall.SIGPIPE:   "PIPE",
	syscall.SIGALRM:   "ALRM",
	syscall.SIGTERM:   "TERM",
	syscall.SIGSTKFLT: "STKFLT",
	syscall.SIGCHLD:   "CHLD",
	syscall.SIGCONT:   "CONT",
	syscall.SIGSTOP:   "STOP",
	syscall.SIGTSTP:   "TSTP",
	syscall.SIGTTIN:   "TTIN",
	syscall.SIGTTOU:   "TTOU",
	syscall.SIGURG:    "URG",
	syscall.SIGXCPU:   "XCPU",
	syscall.SIGXFSZ:   "XFSZ",
	syscall.SIGVTALRM: "VTALRM",
	syscall.SIGPROF:   "PROF",
	syscall.SIGWINCH:  "WINCH",
	syscall.SIGIO:     "IO",
	syscall.SIGPWR:    "PWR",
	syscall.SIGSYS:    "SYS",
}

// maxSignal is the highest signal number Linux accepts (SIGRTMAX).
const maxSignal = 64

// Parse returns the signal named by s. It accepts a name with or without the
// "SIG" prefix in any case ("TERM", "SIGTERM", "term") or a number from 1 to
// 64 ("15", and "SIG40" as Name spells it). The error names the input it
// could not parse.
func Parse(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > maxSignal {
			return 0, fmt.Errorf("unknown signal %q", s)
		}
		return syscall.Signal(n), nil
	}
	for sig, n := range names {
		if n == name {
			return sig, nil
		}
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

// Name returns the conventional name of sig, such as "SIGTERM". A signal
// without a name, such as a real-time signal, is named by its number: "SIG40".
func Name(sig syscall.Signal) string {
	if n, ok := names[sig]; ok {
		return "SIG" + n
	}
	return "SIG" + strconv.Itoa(int(sig))
}
