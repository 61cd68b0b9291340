package signals

import (
	"fmt"
	"io"
	"syscall"
)

// notes say more about a signal than its Action does.
var notes = map[syscall.Signal]string{
	syscall.SIGHUP:    "a reload (nginx); `--stop-on HUP,…` makes it a stop, e.g. to stop with a closing terminal",
	syscall.SIGQUIT:   "a thread dump (a JVM); Ctrl-\\ at a terminal",
	syscall.SIGILL:    "only when sent by another process: a fault in leaderrun's own code still crashes it",
	syscall.SIGTRAP:   "as SIGILL",
	syscall.SIGABRT:   "as SIGILL",
	syscall.SIGBUS:    "as SIGILL",
	syscall.SIGFPE:    "as SIGILL",
	syscall.SIGSEGV:   "as SIGILL",
	syscall.SIGSTKFLT: "as SIGILL",
	syscall.SIGSYS:    "as SIGILL (a seccomp filter's SIGSYS is a fault)",
	syscall.SIGKILL:   "cannot be caught: leaderrun dies at once, and its command with it (the PID namespace ends, or Pdeathsig); the lease is held until it expires",
	syscall.SIGSTOP:   "cannot be caught: stops leaderrun, not the command; after SIGCONT a tenure whose renew deadline passed ends at once",
	syscall.SIGCONT:   "also resumes leaderrun after SIGSTOP or Ctrl-Z",
	syscall.SIGTSTP:   "Ctrl-Z: SIGSTOP to the command's group, its whole tree frozen, then to leaderrun (as PID 1, only the command stops); SIGCONT resumes both, or kills the frozen tree if the tenure ended meanwhile",
	syscall.SIGTTIN:   "stops leaderrun, as it stops a background job that reads the terminal; as PID 1, or in an orphaned process group, it is dropped",
	syscall.SIGTTOU:   "as SIGTTIN (a background job that writes to the terminal)",
	syscall.SIGWINCH:  "the terminal's new size",
}

// Note says more about what leaderrun does with sig than its Action does,
// for the signal table; it is empty when there is nothing to add.
func Note(sig syscall.Signal, stopOn StopOn) string {
	if stopOn.Action(sig) == Stop {
		switch PassOn(sig, 0) {
		case 0:
			return "the command gets the `--stop-signal` (default TERM), not " + Name(sig) + ", and SIGKILL after `--kill-grace` if it still runs; leaderrun releases the lease and exits"
		default:
			return "the command gets " + Name(sig) + ", and SIGKILL after `--kill-grace` if it still runs; leaderrun releases the lease and exits"
		}
	}
	if n, ok := ignored[sig]; ok {
		return n
	}
	return notes[sig]
}

// WriteTable writes the signal table of docs/signals.md: what leaderrun
// does with each signal from 1 to 31 when --stop-on is stopOn.
// TestREADMESignalTable keeps the page's copy equal to it.
func WriteTable(w io.Writer, stopOn StopOn) error {
	if _, err := fmt.Fprintf(w, "| # | signal | leaderrun | details |\n|---|---|---|---|\n"); err != nil {
		return err
	}
	for n := syscall.Signal(1); n <= 31; n++ {
		if _, err := fmt.Fprintf(w, "| %d | %s | %s | %s |\n", int(n), Name(n), stopOn.Action(n), Note(n, stopOn)); err != nil {
			return err
		}
	}
	return nil
}
