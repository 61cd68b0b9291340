package replica

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/supervise"
)

// maxRestartDelay caps the growth of --restart-delay on repeated failures.
const maxRestartDelay = time.Minute

// minRestartBackoff is the least unit the restart delay doubles from, so
// that a zero --restart-delay still backs off on repeated failures.
const minRestartBackoff = 100 * time.Millisecond

// restartDelay is how long to wait before campaigning again after the
// command exited, when that was its failures-th failure in a row (0: it
// succeeded): base for the first, then doubling, up to maxRestartDelay.
// The doubling saturates; it never overflows, whatever failures is.
func restartDelay(base time.Duration, failures int) time.Duration {
	base = min(max(base, 0), maxRestartDelay)
	if failures <= 1 {
		return base
	}
	unit := max(base, minRestartBackoff)
	shift := failures - 1
	if shift >= 62 || unit > maxRestartDelay>>shift {
		return maxRestartDelay
	}
	return min(unit<<shift, maxRestartDelay)
}

// child is what the loop uses of a running command: a *supervise.Child,
// or a fake in the loop's tests.
type child interface {
	Pid() int
	Done() <-chan struct{}
	Signal(sig syscall.Signal) error
	Stop() supervise.Status
	StopWith(sig syscall.Signal) supervise.Status
	Deliver(sig syscall.Signal)
}

// startChild starts a tenure's command.
func startChild(spec supervise.Spec) (child, error) {
	c, err := supervise.Start(spec)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// releaseTimeout bounds the hand-back of the name at the end of a tenure.
const releaseTimeout = 5 * time.Second

// restarts is what a replica remembers of a command's exits, to pace its
// restarts and to say when they loop. The zero value is ready to use.
type restarts struct {
	failures int         // consecutive failures; 0 after a success
	recent   []time.Time // when the command ended on its own, within loopWindow
	warned   time.Time   // when a restart loop was last said
}

// A command that ends on its own loopExits times within loopWindow is in a
// restart loop, whatever its statuses: said at warning level, at most once
// a window while it lasts.
const (
	loopExits  = 5
	loopWindow = time.Minute
)

// countExit counts a command that ended on its own at now into h and
// returns the restart delay before what comes next (again), which it
// logs: a crash loop at warning level, where --log-level warn looks. A
// clean exit within quickExit of the start counts as a failure too:
// restarted, such a command loops as a crashing one does. A command that
// runs a little longer and ends cleanly is restarted without back-off, so
// its loop is told by how often it ends (loopExits in loopWindow).
func (r *Replica) countExit(h *restarts, end tenureEnd, log *slog.Logger, again string, now time.Time) time.Duration {
	if end.status.ExitCode() == 0 && !end.quick && !end.unhealthy {
		h.failures = 0
	} else {
		h.failures++
	}
	h.recent = append(slices.DeleteFunc(h.recent, func(t time.Time) bool { return now.Sub(t) >= loopWindow }), now)
	delay := restartDelay(r.cfg.RestartDelay, h.failures)
	switch {
	case h.failures >= 2:
		what := "command keeps failing"
		if end.status.ExitCode() == 0 {
			what = "command keeps exiting at once"
		}
		log.Warn(what+"; backing off before "+again, "consecutive_failures", h.failures,
			"delay", delay, "last", end.why)
	case len(h.recent) >= loopExits && (h.warned.IsZero() || now.Sub(h.warned) >= loopWindow):
		h.warned = now
		log.Warn("command keeps ending and being restarted; leaderrun restarts a command that ends, so a service must stay in the foreground, and a job meant to run once per tenure belongs with --once",
			"exits", len(h.recent), "within", loopWindow, "last", end.why, "delay", delay)
	default:
		log.Info(again+" after the restart delay", "delay", delay, "consecutive_failures", h.failures)
	}
	return delay
}

// tenureEnd is how a tenure's command ended.
type tenureEnd struct {
	// startErr is why the command did not start (a missing binary, no
	// file descriptors left): the tenure ends as if it had failed at once.
	startErr error
	status   supervise.Status
	exited   bool   // the command ended on its own
	stopped  bool   // leaderrun's stop ended it: the run ends with its status
	why      string // for the tenure's last log line
	// reserved: a step-down or hand-off ended it, whose release reserves
	// the name for another.
	reserved bool
	// quick: the command exited on its own within quickExit of its start.
	quick bool
	// unhealthy: the health check stopped the command, to restart it
	// (no other replica could take the name over): a failure.
	unhealthy bool
}

// quickExit is how soon after its start a command's exit counts as "at
// once": a command that daemonizes (forks and exits) or has nothing to do
// ends within milliseconds, a service does not.
const quickExit = time.Second

// serve runs the command for one tenure, with env, and returns how it
// ended once it and every descendant are dead. publish is called with the
// command once it started, and with nil once it ended, with mu held.
// stopping tells serve to stop the command at once (nil: the tenure's end
// says when, as a partition's hand-off on leaving); then, and when the
// tenure ends after a stop signal, the command gets that signal.
// restart, when it closes, stops the command as unhealthy (see
// health.go): the tenure ends as if it had failed.
func (r *Replica) serve(ten *elect.Tenure, env []string, log *slog.Logger, publish func(child), stopping, restart <-chan struct{}) (end tenureEnd) {
	// From fork to publication, a signal to relay waits (see starting).
	r.starting.RLock()
	child, err := r.startCommand(supervise.Spec{
		Path:       r.cfg.Command[0],
		Args:       r.cfg.Command,
		Env:        env,
		StopSignal: r.cfg.StopSignal,
		KillGrace:  r.cfg.KillGrace,
		Logger:     log,
		Namespace:  r.cfg.Namespace,
		Proved:     ten.Seized(),
		// Continued after a stop that froze the command's tree, the
		// tree runs again only while the tenure holds (see
		// supervise.Suspend): DESIGN's first action after a wake-up that
		// finds the deadline passed is to stop the command.
		Resumable: ten.Trusted,
	})
	if err == nil {
		r.mu.Lock()
		publish(child)
		r.mu.Unlock()
	}
	r.starting.RUnlock()
	if err != nil {
		// Not the end of leaderrun: give the lease back so that another
		// replica can take it, and try again after the restart delay.
		log.Error("command did not start; handing the lease back", "err", err)
		code := codeNotExecutable
		if errors.Is(err, supervise.ErrNotFound) {
			code = codeNotFound
		}
		return tenureEnd{startErr: err, exited: true, status: supervise.Status{Code: code}, why: "command did not start"}
	}
	defer func() {
		r.mu.Lock()
		publish(nil)
		r.mu.Unlock()
	}()

	started := time.Now()
	select {
	case <-child.Done():
		if r.stopAsked.Load() {
			// It ended at the stop signal that relaySignals gave it
			// (Deliver), which closes stopping next: the stop, not an
			// exit of its own.
			<-r.stopping
			end.stopped, end.why = true, r.stopReason()
			end.status = child.StopWith(r.signal())
			break
		}
		if !ten.Trusted() {
			// Killed frozen at a wake-up past the renew deadline
			// (supervise.Suspend, Spec.Resumable), or ended as trust
			// did: the tenure's end, which its Context says once the
			// tenure's goroutine has read the clock.
			<-ten.Context().Done()
			end = r.tenureOver(ten, child, log)
			break
		}
		ran := time.Since(started)
		end = tenureEnd{status: child.Stop(), exited: true, quick: ran < quickExit} // Stop kills what the command left behind
		end.why = "command " + end.status.String()
		if end.quick && end.status.ExitCode() == 0 && !r.cfg.Once { // --once restarts nothing
			log.Warn("command exited at once; leaderrun restarts a command that exits, so it must stay in the foreground "+
				"(one that daemonizes or forks into the background looks finished, and what it left running is killed)",
				"status", end.status.String(), "ran", ran.Round(time.Millisecond))
		} else {
			logExit(log, end.status)
		}
		return end
	case <-ten.Context().Done():
		end = r.tenureOver(ten, child, log)
	case <-stopping:
		end.stopped, end.why = true, r.stopReason()
		end.status = child.StopWith(r.signal())
	case <-restart:
		end.exited, end.unhealthy, end.why = true, true, "command unhealthy; restarting it"
		end.status = child.Stop()
	}
	log.Info("command stopped", "status", end.status.String())
	return end
}

// tenureOver stops child at the end of ten, whose Context has ended, and
// says why.
func (r *Replica) tenureOver(ten *elect.Tenure, child child, log *slog.Logger) (end tenureEnd) {
	cause := context.Cause(ten.Context())
	end.why = cause.Error()
	level := slog.LevelWarn
	if errors.Is(cause, elect.ErrSteppedDown) || errors.Is(cause, elect.ErrHandedOff) {
		level = slog.LevelInfo // planned: an operator or a hand-off asked for it
		end.reserved = true
	}
	log.Log(context.Background(), level, "tenure ended; stopping command", "cause", end.why)
	if r.stopped() {
		end.status = child.StopWith(r.signal())
	} else {
		end.status = child.Stop()
	}
	return end
}

// logExit says that the command ended on its own: at info when it
// succeeded, else as a warning (a failure, or a signal from elsewhere: the
// kernel's out-of-memory killer's SIGKILL, say).
func logExit(log *slog.Logger, st supervise.Status) {
	level := slog.LevelInfo
	if st.ExitCode() != 0 {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "command exited", "status", st.String())
}

// release hands the name back, and reports whether it did, or whether a
// follower on this host took it first after the end signal that such a
// follower watched (watched: an end signal with nobody reading it took
// nothing, and a lease lost then was lost before); the child and its
// descendants are dead by now. Its log line is the
// tenure's last and says why the tenure ended. A failed release never
// changes the exit status.
func (r *Replica) release(ten *elect.Tenure, log *slog.Logger, why string, watched bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := ten.Release(ctx); {
	case err == nil:
		log.Info("tenure over; released the lease", "why", why)
		return true
	case errors.Is(err, lease.ErrLost) && watched:
		log.Info("tenure over; the lease was no longer ours to release (a follower on this host may have taken it at our end signal)", "why", why)
		return true
	case errors.Is(err, lease.ErrLost):
		log.Info("tenure over; the lease was no longer ours to release", "why", why)
	default:
		log.Warn("tenure over; could not release the lease, it expires on its own", "why", why, "err", err)
	}
	return false
}

// childEnv is this process's environment without leaderrun's own options
// (which may hold a store password), plus the tenure's identity and extra.
func (r *Replica) childEnv(ten *elect.Tenure, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"LEADERRUN_NAME="+r.cfg.Name,
		"LEADERRUN_HOLDER="+r.holder,
		"LEADERRUN_TOKEN="+strconv.FormatInt(ten.Token(), 10))
	return append(env, extra...)
}
