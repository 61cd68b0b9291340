package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// Child is a running command started by Start. Its methods are safe for
// concurrent use.
type Child struct {
	spec   Spec // with defaults applied
	logger *slog.Logger

	pid    int    // set under theReaper.mu before Start returns; never changes
	start  uint64 // the child's start time (procstat.Stat.Start); set with pid, 0 if unread
	status Status // set under theReaper.mu by the reaper
	// escalated: Stop sent SIGKILL once the stop signal's grace ran out
	// (Status.Killed). Set under theReaper.mu.
	escalated bool
	reaped    chan struct{} // closed by the reaper once the child has been reaped
	done      chan struct{} // closed after reaped, once the terminal is given back

	tag string // tags the child's environment; see attrib.go
	// word: a prepared start's handshake pipe, on which Prepared.Start
	// tells the init to run the command (see prepare.go).
	word *os.File
	ns   *nsLaunch // how a child in a PID namespace was started, or nil
	// cmd: a pidfd of the command a namespace's init runs, and its pid
	// here, while held (see nsstop.go). Guarded by theReaper.mu.
	cmd struct {
		held    bool
		fd, pid int
	}
	cg  *cgroup   // the child's own cgroup, or nil; see cgroup.go
	tty *terminal // the controlling terminal on its stdin, or nil; see tty.go

	frozen *frozenTree // while a suspension holds its tree frozen; guarded by theReaper.mu (see freeze.go)
	// stopAsked: a SIGSTOP was passed to the namespace's init to stop the
	// command's group, and may not have reached it yet (see freeze.go).
	stopAsked atomic.Bool

	stopOnce sync.Once
	// stopSent: the stop signal went, by Deliver or Stop, and stopSig
	// names it; stopReached: a process received it. Set under
	// theReaper.mu.
	stopSent    bool
	stopReached bool
	stopSig     syscall.Signal
}

// Start runs the command described by spec. The error wraps ErrNotFound or
// ErrNotExecutable when the command cannot be found or executed.
func Start(spec Spec) (*Child, error) {
	c, path, err := begin(spec)
	if err == nil {
		c.logStarted(path)
	}
	return c, err
}

// logStarted says that c started, running path.
func (c *Child) logStarted(path string) {
	if c.cg != nil {
		c.logger.Info("child started", "pid", c.pid, "path", path, "cgroup", c.cg.dir)
	} else {
		c.logger.Info("child started", "pid", c.pid, "path", path)
	}
}

// begin is Start, less its log line; it also returns the program's path.
func begin(spec Spec) (*Child, string, error) {
	logger := spec.Logger
	spec = spec.withDefaults()
	path, err := spec.lookPath()
	if err != nil {
		return nil, "", err
	}
	if spec.Dir != "" {
		if _, err := os.Stat(spec.Dir); err != nil {
			return nil, "", fmt.Errorf("start %q: %w", spec.Path, err)
		}
	}
	if len(spec.Args) == 0 {
		spec.Args = []string{spec.Path}
	}
	startReaper(spec.Logger)
	if logger != nil {
		theReaper.setLogger(logger)
	}

	c := &Child{
		spec:   spec,
		logger: spec.Logger,
		reaped: make(chan struct{}),
		done:   make(chan struct{}),
		tag:    newTag(),
	}
	c.spec.Env = append(c.spec.Env[:len(c.spec.Env):len(c.spec.Env)], tagEnv+"="+c.tag)
	c.tty = newTerminal(spec.Stdin)
	if base := ""; !spec.noCgroup {
		if base = childCgroups(c.logger, !spec.Proved); base != "" {
			if c.cg, err = newCgroup(base); err != nil {
				c.logger.Debug("the child gets no cgroup of its own", "err", err)
			}
		}
	}
	started := make(chan error, 1)
	go c.run(path, started)
	if err := <-started; err != nil {
		if c.cg != nil {
			c.cg.kill()
		}
		return nil, "", err
	}
	return c, path, nil
}

// run forks the child from a locked OS thread and keeps that thread until the
// child has been reaped, because Pdeathsig fires when the forking thread
// exits. It reports the fork's outcome on started and returns after the child
// has been reaped.
func (c *Child) run(path string, started chan<- error) {
	// Never unlocked: the thread exits with this goroutine.
	runtime.LockOSThread()

	attr := &syscall.ProcAttr{
		Dir:   c.spec.Dir,
		Env:   c.spec.Env,
		Files: []uintptr{c.spec.Stdin.Fd(), c.spec.Stdout.Fd(), c.spec.Stderr.Fd()},
		Sys: &syscall.SysProcAttr{
			// Its own group, in the background of a terminal: leaderrun
			// stays the terminal's foreground job, so that Ctrl-C and
			// Ctrl-Z reach leaderrun, whatever the command does with
			// them (see package doc).
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if c.spec.clearAmbient {
		if err := dropInheritedCaps(); err != nil {
			started <- fmt.Errorf("start %q: %w", c.spec.Path, err)
			return
		}
	}
	exe, args := path, c.spec.Args
	sigs := startSignals
	var ns *nsLaunch
	if c.spec.Namespace != NoNamespace {
		var err error
		if exe, args, ns, err = c.prepareNamespace(path, attr, sigs); err != nil {
			started <- err
			return
		}
	} else if sigs.lostInFork() {
		var err error
		if exe, args, err = c.prepareExec(path, attr, sigs); err != nil {
			started <- fmt.Errorf("start %q with the signals this process started with: %w", c.spec.Path, err)
			return
		}
	}
	var stopsR, stopsW *os.File
	if ns != nil {
		stopsR, stopsW = c.passStops(attr)
	}
	if c.cg != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, c.cg.fd
	}
	suspendMu.Lock() // not while a suspension freezes the trees
	err := theReaper.fork(c, func() (int, error) {
		if c.spec.Namespace == UserNamespace {
			defer dumpableWhileMapping()()
		}
		defer sigs.blockOnThread()() // the child starts with this thread's mask
		pid, err := syscall.ForkExec(exe, args, attr)
		if err == nil {
			// The reaper's lock is held: the child cannot be reaped yet,
			// so pid is still the child's.
			if st, err := procstat.Read(pid); err == nil {
				c.start = st.Start
			}
		}
		return pid, err
	})
	suspendMu.Unlock()
	runtime.KeepAlive(c.spec.Stdin)
	runtime.KeepAlive(c.spec.Stdout)
	runtime.KeepAlive(c.spec.Stderr)
	if stopsW != nil {
		stopsW.Close()
		if err == nil {
			go c.readStops(stopsR)
		} else {
			stopsR.Close()
		}
	}
	if ns != nil {
		ns.forked()
		if ns.prepared {
			c.word = ns.hsWrite
		}
	}
	if err != nil {
		if ns != nil {
			ns.status.Close()
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
				errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) {
				// The kernel refused the namespace, not the command.
				started <- fmt.Errorf("start %q: %w (%v): %v", c.spec.Path, ErrNamespace, c.spec.Namespace, err)
				return
			}
		}
		started <- forkError(c.spec.Path, err)
		return
	}
	if ns != nil {
		c.ns = ns
		go c.holdCommand()
	}
	started <- nil

	<-c.reaped
	if ns != nil {
		c.releaseCommand()
	}
	if ns != nil {
		theReaper.mu.Lock()
		logger := c.logger // a prepared start's is its tenure's
		theReaper.mu.Unlock()
		st := ns.finish(c.Status(), logger)
		theReaper.mu.Lock()
		c.status = st
		theReaper.mu.Unlock()
	}
	c.reclaimTerminal(false)
	close(c.done)
}

// exited records the child's status. The reaper calls it with its mutex held.
func (c *Child) exited(st Status) {
	c.status = st
	close(c.reaped)
}

// Pid returns the child's process ID, which is also its process group ID.
func (c *Child) Pid() int { return c.pid }

// StartTime returns the child's start time in clock ticks since boot, as
// /proc/PID/stat showed it right after the fork (0 if it could not be
// read). With Pid, it names the child even after its pid is reused.
func (c *Child) StartTime() uint64 { return c.start }

// Done is closed once the child itself has been reaped. Its descendants may
// still be running; Stop kills them.
func (c *Child) Done() <-chan struct{} { return c.done }

// Status returns how the child ended. It is the zero Status until Done is
// closed.
func (c *Child) Status() Status {
	theReaper.mu.Lock()
	defer theReaper.mu.Unlock()
	st := c.status
	st.Killed = c.escalated && st.Signal == syscall.SIGKILL
	return st
}

// Signal sends sig to the child's process group, and to the child itself if
// it has left that group. After the child has been reaped it does nothing and
// returns nil, so it never signals a recycled pid. In a namespace, the
// signals go to the init, which passes them to the command's group (only
// Stop's and Deliver's stop signal goes to that group directly);
// SIGSTOP is sent as SIGTSTP, which the init turns into SIGSTOP. While a
// suspension holds the child's tree frozen, SIGCONT waits until the tree
// was thawed or killed (see Suspend).
func (c *Child) Signal(sig syscall.Signal) error {
	if sig == syscall.SIGSTOP && c.spec.Namespace != NoNamespace {
		// SIGSTOP would stop the init, not the command: the init
		// turns a SIGTSTP into a SIGSTOP of the command's group, which
		// a freeze that follows waits for (see freeze.go).
		sig = syscall.SIGTSTP
		c.stopAsked.Store(true)
	}
	if sig == syscall.SIGCONT {
		c.awaitThaw()
		c.giveTerminal() // resumed by fg: the terminal goes back first
	}
	r := &theReaper
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isLive(c.pid) {
		return nil
	}
	if !c.signalLocked(sig) {
		return fmt.Errorf("signal child %d: %w", c.pid, unix.ESRCH)
	}
	return nil
}

// signalLocked sends sig to the child's process group when that cannot hit a
// stranger, and to the child itself when it is live and has left its group.
// It reports whether any process was signalled. Until the child is reaped
// its pid pins the group ID; afterwards the group is signalled only while
// one of our own children is still in it, because an empty group's ID may be
// reused. theReaper.mu must be held.
func (c *Child) signalLocked(sig syscall.Signal) bool {
	r := &theReaper
	live := r.isLive(c.pid)
	sent := false
	if live || r.hasChildInGroup(c.pid) {
		sent = killGroup(c.pid, sig) == nil
	}
	if live {
		if pgid, err := unix.Getpgid(c.pid); err == nil && pgid != c.pid {
			sent = unix.Kill(c.pid, sig) == nil || sent
		}
	}
	return sent
}

// killGroup sends sig to process group pgid. It refuses group IDs 0 and 1,
// which kill(2) would read as "our group" and "every process", and our own
// group.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 || pgid == unix.Getpgrp() {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	return unix.Kill(-pgid, sig)
}
