package replica

import (
	"os"
	"syscall"

	"github.com/leaderrun/leaderrun/signals"
	"github.com/leaderrun/leaderrun/supervise"
)

// relaySignals forwards signals to the running commands until quit closes.
// The first stop signal (--stop-on) instead makes the mode stop them, with
// the signal signals.PassOn says; later ones are forwarded like any other
// (a second Ctrl-C reaches the commands while they wind down).
func (r *Replica) relaySignals(sigs <-chan os.Signal, quit <-chan struct{}) {
	for {
		select {
		case <-quit:
			return
		case s := <-sigs:
			sig, _ := s.(syscall.Signal)
			switch r.cfg.StopOn.Action(sig) {
			case signals.Suspend:
				r.suspend()
				continue
			case signals.Stop:
				if !r.stopped() {
					passed := signals.PassOn(sig, r.cfg.StopSignal)
					// The commands first, and the followers on this
					// host (which may take the name while the commands
					// stop), before anything is logged: the tenures'
					// ends log, and wait, once those have it.
					r.stopAsked.Store(true)
					if r.deliver {
						for _, c := range r.commands() {
							c.Deliver(passed)
						}
					}
					r.mu.Lock()
					word := r.stopWord
					r.mu.Unlock()
					if word != nil {
						word()
					}
					r.log.Info("received stop signal", "signal", signals.Name(sig), "command_gets", signals.Name(passed))
					if passed != sig {
						r.mu.Lock()
						r.received = sig
						r.mu.Unlock()
					}
					r.stop(passed)
					continue
				}
			case signals.Ignore, signals.Kernel:
				continue // not subscribed to; never relayed
			}
			for _, c := range r.commands() {
				r.log.Debug("forwarding signal", "signal", signals.Name(sig), "pid", c.Pid())
				c.Signal(sig)
			}
		}
	}
}

// commands returns the running commands, once every command that is
// starting now has started and been published (see starting).
func (r *Replica) commands() []child {
	r.starting.Lock()
	defer r.starting.Unlock()
	return r.children()
}

// suspend passes Ctrl-Z on: it stops the commands' groups with SIGSTOP,
// then stops this process, as a job stops, with every command's whole
// tree frozen (supervise.Suspend), so that the shell's fg (a SIGCONT,
// which leaderrun forwards) resumes them all. Nothing of a command's tree
// runs while leaderrun is stopped; on resumption, a tree whose tenure's
// deadline passed meanwhile is killed before it thaws, and that tenure
// ends, before any store call.
func (r *Replica) suspend() {
	for _, c := range r.commands() {
		r.log.Info("suspended (SIGTSTP); stopping the command too, its whole tree frozen", "pid", c.Pid())
		c.Signal(syscall.SIGSTOP)
	}
	supervise.Suspend()
}

// stop asks the mode to stop its commands with sig (0: the stop signal)
// and end. Only the first call counts.
func (r *Replica) stop(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.stopping:
	default:
		if sig == 0 {
			sig = r.cfg.StopSignal
		}
		r.stopSig = sig
		close(r.stopping)
		r.report.stopping()
	}
}

// stopReason says why a tenure ended when leaderrun was told to stop.
func (r *Replica) stopReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.received != 0 {
		return "stop signal " + signals.Name(r.received) + " (the command got " + signals.Name(r.stopSig) + ")"
	}
	return "stop signal " + signals.Name(r.stopSig)
}

func (r *Replica) stopped() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// signal is the signal leaderrun was stopped with.
func (r *Replica) signal() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopSig
}
