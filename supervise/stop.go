package supervise

import (
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/signals"
	"golang.org/x/sys/unix"
)

// groupPoll is how often Stop checks whether the child's group has emptied
// after the child itself was reaped.
const groupPoll = 10 * time.Millisecond

// Stop ends the child and every descendant, and returns the child's Status
// once all of them are dead and reaped. It sends StopSignal (then SIGCONT, so
// a stopped group can act on it) to the child's group, waits until the group
// is gone or KillGrace has passed, sends SIGKILL to the group and the child,
// then kills what escaped the group (setsid): with a cgroup of the child's
// own, every process left in it (cgroup.kill); in a PID namespace of the
// child's own, nothing is left (the kernel killed the namespace with its
// init); otherwise it sweeps — kills and reaps every other child of this
// process that is not a live Child, until none remains: descendants
// adopted by this subreaper or PID 1, except those it can tell came from
// another Child not yet stopped (see attrib.go).
//
// Stop is idempotent and safe to call after the child exited by itself; then
// only what remains of its group and the escaped descendants are stopped.
// Concurrent calls all return when the first has finished.
func (c *Child) Stop() Status {
	return c.StopWith(c.spec.StopSignal)
}

// StopWith is Stop with sig in place of StopSignal: leaderrun passes on the
// signal that told it to shut down.
func (c *Child) StopWith(sig syscall.Signal) Status {
	c.stopOnce.Do(func() { c.stop(sig) })
	<-c.done
	return c.Status()
}

// Deliver sends sig, the stop signal, to the child's group now, ahead of
// the Stop or StopWith that is to follow, which then sends no stop signal of
// its own (it logs, sends SIGCONT and waits as after its own): leaderrun
// tells its commands to stop as soon as it is told to, before it logs or
// wakes the goroutines that end their tenures. Only the first stop signal
// goes, by Deliver or Stop; none goes while a suspension holds the tree
// frozen (Stop thaws it first, then sends its own).
func (c *Child) Deliver(sig syscall.Signal) {
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	if !c.stopSent && c.frozen == nil {
		c.sendStopLocked(sig)
	}
}

// sendStopLocked sends sig, the stop signal, and records that it went.
// theReaper.mu must be held.
func (c *Child) sendStopLocked(sig syscall.Signal) {
	c.stopSent, c.stopSig = true, sig
	c.stopReached = c.signalCommandLocked(sig) || c.signalLocked(sig)
}

func (c *Child) stop(sig syscall.Signal) {
	c.awaitThaw() // a frozen tree is thawed or killed first (see Suspend)
	grace := c.spec.KillGrace
	deadline := time.Now().Add(grace)
	gone := false
	theReaper.mu.Lock()
	if !c.stopSent {
		c.sendStopLocked(sig)
	}
	sig, reached := c.stopSig, c.stopReached
	theReaper.mu.Unlock()
	if reached {
		c.logger.Info("stopping child", "pid", c.pid, "signal", signals.Name(sig), "grace", grace)
		if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
			c.signal(syscall.SIGCONT)
		}
		gone = c.awaitGroup(deadline)
	}
	// A group seen empty stays empty (a process can join only a group that
	// has one): no SIGKILL, and no look for one of ours still in it.
	if !gone && c.signal(syscall.SIGKILL) {
		c.logger.Warn("kill grace expired; sent SIGKILL", "pid", c.pid, "grace", grace)
		theReaper.mu.Lock()
		c.escalated = sig != syscall.SIGKILL
		theReaper.mu.Unlock()
	}
	c.awaitReaped()
	switch {
	case c.cg != nil:
		// Every descendant is in the cgroup, whatever it did with its
		// session, group or parent: no scan of /proc is needed.
		if n := c.cg.kill(); n > 0 {
			c.logger.Warn("killed what was left in the child's cgroup", "pid", c.pid, "processes", n)
		}
		theReaper.reap() // those of them this process adopted
		theReaper.forgetChild(c)
	case c.spec.Namespace != NoNamespace:
		// The child was its PID namespace's init: its descendants were
		// never this process's to adopt, and the kernel killed them all
		// before the init could be reaped.
		theReaper.forgetChild(c)
	default:
		sweep(c)
	}
}

// signal sends sig to the child's group and, if it left the group, to the
// child, and reports whether any process received it.
func (c *Child) signal(sig syscall.Signal) bool {
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	return c.signalLocked(sig)
}

// awaitGroup returns at deadline (false), or earlier once the child has
// been reaped and no process is left in its group (true).
func (c *Child) awaitGroup(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-c.reaped:
	case <-timer.C:
		return false
	}
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for unix.Kill(-c.pid, 0) != unix.ESRCH {
		select {
		case <-tick.C:
		case <-timer.C:
			return false
		}
	}
	return true
}

// awaitReaped waits for the reaper to collect the child after SIGKILL,
// warning periodically: a process in uninterruptible sleep dies only when
// its system call returns.
func (c *Child) awaitReaped() {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.reaped:
			return
		case <-tick.C:
			c.logger.Warn("child still alive after SIGKILL", "pid", c.pid)
		}
	}
}
