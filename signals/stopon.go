package signals

import (
	"fmt"
	"strings"
	"syscall"
)

// StopOn is the set of received signals that stop the tenure, as
// --stop-on names them; every other signal of Forwarded is only forwarded.
// The zero value is DefaultStopOn.
type StopOn struct {
	mask uint64 // bit N: signal N stops; none set: DefaultStopOn's
}

// DefaultStopOn is --stop-on's default, "INT,TERM,PWR": Ctrl-C, what
// docker stop, systemd and Kubernetes send, and what LXC sends a
// container's init to shut it down. HUP and QUIT are forwarded, so that a
// command reloads (nginx) or dumps its threads (a JVM) and keeps running.
var DefaultStopOn = StopOn{}.with(syscall.SIGINT, syscall.SIGTERM, syscall.SIGPWR)

func (s StopOn) with(sigs ...syscall.Signal) StopOn {
	for _, sig := range sigs {
		s.mask |= 1 << uint(sig)
	}
	return s
}

// Has reports whether sig is in the set.
func (s StopOn) Has(sig syscall.Signal) bool {
	if s.mask == 0 {
		s = DefaultStopOn
	}
	return sig > 0 && sig < 64 && s.mask&(1<<uint(sig)) != 0
}

// String lists the set as --stop-on takes it: "INT,TERM,PWR".
func (s StopOn) String() string {
	var names []string
	for n := syscall.Signal(1); n < 64; n++ {
		if s.Has(n) {
			names = append(names, Name(n)[len("SIG"):])
		}
	}
	return strings.Join(names, ",")
}

// ParseStopOn reads --stop-on: signal names or numbers separated by commas
// ("HUP,TERM", "SIGINT, 15"), each one that leaderrun forwards (Forwarded).
// The error names the bad input and the word in it.
func ParseStopOn(list string) (StopOn, error) {
	var s StopOn
	for _, word := range strings.Split(list, ",") {
		word = strings.TrimSpace(word)
		sig, err := Parse(word)
		if err != nil {
			return StopOn{}, fmt.Errorf("%q: %w", list, err)
		}
		if Base(sig) != Forward {
			return StopOn{}, fmt.Errorf("%q: %s cannot stop leaderrun (%s); give signals it forwards: %s",
				list, Name(sig), Base(sig), forwardedList())
		}
		s = s.with(sig)
	}
	return s, nil
}

func forwardedList() string {
	var names []string
	for _, f := range Forwarded {
		names = append(names, Name(f.(syscall.Signal))[len("SIG"):])
	}
	return strings.Join(names, ",")
}

// Action returns what leaderrun does with sig: Stop for a signal in the
// set, else Base(sig).
func (s StopOn) Action(sig syscall.Signal) Action {
	if s.Has(sig) {
		return Stop
	}
	return Base(sig)
}

// PassOn returns the signal the command's group gets when leaderrun
// receives the stop signal received and stops the tenure: INT and TERM as
// received, so that Ctrl-C reaches the command as Ctrl-C and docker stop
// as SIGTERM; any other stop signal (PWR, or HUP or QUIT that --stop-on
// names) becomes stop, the --stop-signal, because the command would take
// it for something else (a reload, a thread dump) or die by its default
// action without cleaning up (PWR).
func PassOn(received, stop syscall.Signal) syscall.Signal {
	switch received {
	case syscall.SIGINT, syscall.SIGTERM:
		return received
	}
	return stop
}
