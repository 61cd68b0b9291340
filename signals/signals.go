// Package signals says which signals leaderrun forwards to its child, which
// of them also stop leaderrun, and which it never touches.
//
// Forwarded is an explicit allow-list. Notify subscribes to exactly that list:
// never to every signal (the Go runtime sends itself SIGURG for preemption),
// and nothing here calls signal.Ignore (a child would inherit SIG_IGN).
// CHLD, URG, PIPE, TTIN and TTOU are never forwarded.
package signals

import (
	"os"
	"os/signal"
	"syscall"
)

// Forwarded lists the signals leaderrun relays to its child's process group.
// Callers must not modify it.
var Forwarded = []os.Signal{
	syscall.SIGHUP,
	syscall.SIGINT,
	syscall.SIGQUIT,
	syscall.SIGTERM,
	syscall.SIGUSR1,
	syscall.SIGUSR2,
	syscall.SIGWINCH,
	syscall.SIGCONT,
	syscall.SIGALRM,
}

// Suspend is the terminal's Ctrl-Z. leaderrun does not forward it: it stops
// the child's group and then itself, as a job does (the command runs in the
// background of the terminal, see package supervise).
var Suspend os.Signal = syscall.SIGTSTP

// IsStop reports whether sig stops leaderrun itself once it has been
// forwarded: TERM, INT, QUIT and HUP do; every other signal does not.
func IsStop(sig os.Signal) bool {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP:
		return true
	}
	return false
}

// Notify relays every signal in Forwarded, and Suspend, and only those, to
// c.
// Like signal.Notify, it does not block sending to c: c should be buffered.
//
// It also subscribes to SIGPIPE, on a channel of its own that nobody reads:
// then a write to a closed pipe — leaderrun's stderr piped into `head -1`
// — fails with EPIPE instead of killing leaderrun in the middle of a
// tenure (the child would die by SIGKILL without its stop signal, and the
// lease would stay held). The child's disposition of SIGPIPE is the
// default, as exec resets handled signals.
func Notify(c chan<- os.Signal) {
	signal.Notify(c, Forwarded...)
	signal.Notify(c, Suspend)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
