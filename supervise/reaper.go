package supervise

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often the reaper calls wait4 without a SIGCHLD, as a
// safety net for coalesced or lost signals.
const pollInterval = time.Second

// reaper owns every wait4 in the process. Its goroutine, started once by the
// first Start, runs for the life of the process.
type reaper struct {
	// mu guards children and logger. It is held across each wait4 and
	// across fork+register, so a child cannot be reaped before it is
	// registered and no status is lost.
	mu       sync.Mutex
	children map[int]*Child // live Children by pid
	logger   *slog.Logger   // the last non-nil Spec.Logger, for orphans
	// tags and origins attribute escaped descendants to Children (see
	// attrib.go); a Child stays in them until its Stop has swept.
	tags    map[string]*Child
	origins map[procID]*Child
}

var (
	theReaper = reaper{
		children: make(map[int]*Child),
		logger:   slog.New(slog.DiscardHandler),
		tags:     make(map[string]*Child),
		origins:  make(map[procID]*Child),
	}
	reaperOnce sync.Once
)

// startReaper makes this process a child subreaper (unless it is PID 1) and
// starts the reaper goroutine. Only the first call does anything.
func startReaper(logger *slog.Logger) {
	reaperOnce.Do(func() {
		if !IsInit() {
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				logger.Warn("cannot become child subreaper; escaped descendants will not be killed", "err", err)
			}
		}
		sigchld := make(chan os.Signal, 1)
		signal.Notify(sigchld, syscall.SIGCHLD)
		go theReaper.loop(sigchld)
	})
}

// loop reaps on every SIGCHLD and every pollInterval. It never returns.
func (r *reaper) loop(sigchld <-chan os.Signal) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-sigchld:
		case <-tick.C:
			r.recordWhileSeveral()
		}
		r.reap()
	}
}

// reap collects every exited child of this process without blocking. A
// registered Child gets its status; any other pid is logged and forgotten.
// A registered Child that was stopped is told so (see tty.go), after the
// mutex is released.
func (r *reaper) reap() {
	for _, s := range r.reapLocked() {
		s.c.jobStopped(s.sig)
	}
}

// jobStop is a stop of a Child that reap saw.
type jobStop struct {
	c   *Child
	sig syscall.Signal
}

func (r *reaper) reapLocked() (stops []jobStop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WUNTRACED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return stops // ECHILD: no children; 0: none has exited
		}
		if ws.Stopped() {
			if c, ok := r.children[pid]; ok && c.tty != nil {
				stops = append(stops, jobStop{c, ws.StopSignal()})
			}
			continue
		}
		st := statusOf(ws)
		if c, ok := r.children[pid]; ok {
			delete(r.children, pid)
			c.exited(st)
			continue
		}
		r.logger.Debug("reaped orphan", "pid", pid, "status", st.String())
	}
}

// recordWhileSeveral records the Children's descendants when a sweep may
// have to tell whose a stray is: while at least one Child will sweep and
// more than one may leave strays for this process to adopt (with one,
// every stray is its own or nobody's). A Child in a PID namespace of its
// own leaves none, and one with a cgroup of its own does not sweep (see
// Child.stop), so by default nothing is recorded and /proc is not read.
func (r *reaper) recordWhileSeveral() {
	r.mu.Lock()
	defer r.mu.Unlock()
	strayers, sweepers := 0, 0
	for _, c := range r.children {
		if c.spec.Namespace == NoNamespace {
			strayers++
			if c.cg == nil {
				sweepers++
			}
		}
	}
	if strayers > 1 && sweepers > 0 {
		r.recordOrigins()
	}
}

// fork runs forkExec with r.mu held and registers c under the pid it returns.
func (r *reaper) fork(c *Child, forkExec func() (int, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := forkExec()
	if err != nil {
		return err
	}
	c.pid = pid
	r.children[pid] = c
	r.tags[c.tag] = c
	return nil
}

// setLogger makes the reaper log orphans to logger.
func (r *reaper) setLogger(logger *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logger = logger
}

// isLive reports whether pid is a registered Child that has not been reaped.
// r.mu must be held.
func (r *reaper) isLive(pid int) bool {
	_, ok := r.children[pid]
	return ok
}

// statusOf converts a wait status of an exited or killed process.
func statusOf(ws unix.WaitStatus) Status {
	if ws.Signaled() {
		return Status{Signal: syscall.Signal(ws.Signal())}
	}
	return Status{Code: ws.ExitStatus()}
}
