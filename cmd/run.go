package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/run"

	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/sqlite"
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/signals"
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

// runLeader campaigns, runs the command while leading, and returns the
// child's final status as *childExit, or the error that ended the run.
func runLeader(ctx context.Context, sigs <-chan os.Signal, rc runConfig, log *slog.Logger) error {
	dsn := rc.Store
	if dsn == "" {
		path := sqlite.DefaultPath()
		dsn = "sqlite:" + path
		log.Info("using the per-host SQLite store; only processes sharing this file take part in the election",
			"path", path)
	}
	holder := rc.Identity
	if holder == "" {
		holder = defaultIdentity()
	}
	if err := supervise.Check(supervise.Spec{Path: rc.Command[0]}); err != nil {
		return err // 127 or 126, before campaigning
	}
	if err := environ.Hide(); err != nil {
		log.Warn("cannot make this process non-dumpable; other processes of its user can read its memory", "err", err)
	}
	l := newLeader(rc, holder, log)
	l.dsn = dsn
	var g run.Group
	quit := make(chan struct{})
	g.Add(func() error { l.relaySignals(sigs, quit); return nil },
		func(error) { close(quit) })
	g.Add(l.run, func(error) { l.stop(0) })
	if rc.HTTPAddr != "" {
		ln, err := observe.Listen(rc.HTTPAddr)
		if err != nil {
			return &usageError{err}
		}
		l.log.Info("serving /healthz, /leader and /metrics", "addr", ln.Addr().String())
		l.report.obs.SetLogger(l.log)
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return l.report.obs.Serve(ctx, ln) }, func(error) { cancel() })
	}
	wctx, wcancel := context.WithCancel(ctx)
	g.Add(func() error { l.report.watchdog(wctx); <-wctx.Done(); return nil }, func(error) { wcancel() })
	return g.Run()
}

// leader runs the campaign → tenure → release cycle for one name.
type leader struct {
	cfg     runConfig
	dsn     string
	log     *slog.Logger
	holder  string
	elector *lease.Elector // set by run once the store is open
	report  *reporter
	start   func(supervise.Spec) (child, error) // startChild, or a fake
	clock   lease.Clock                         // nil: lease.BootClock

	mu       sync.Mutex // guards child, stopSig and stopping's closing
	child    child
	stopSig  syscall.Signal
	stopping chan struct{} // closed when leaderrun was told to stop
}

func newLeader(rc runConfig, holder string, log *slog.Logger) *leader {
	return &leader{
		cfg: rc, holder: holder,
		log:      log.With("name", rc.Name, "holder", holder),
		report:   newReporter(rc.Name, holder, rc.RenewDeadline),
		start:    startChild,
		stopping: make(chan struct{}),
	}
}

// relaySignals forwards signals to the current child until quit closes.
// The first stop signal instead makes the loop stop the child with it;
// later ones are forwarded like any other (a second Ctrl-C reaches the
// child while it winds down).
func (l *leader) relaySignals(sigs <-chan os.Signal, quit <-chan struct{}) {
	for {
		select {
		case <-quit:
			return
		case s := <-sigs:
			sig, _ := s.(syscall.Signal)
			if s == signals.Suspend {
				l.suspend()
				continue
			}
			if signals.IsStop(s) && !l.stopped() {
				l.log.Info("received stop signal", "signal", signals.Name(sig))
				l.stop(sig)
				continue
			}
			if c := l.current(); c != nil {
				l.log.Debug("forwarding signal", "signal", signals.Name(sig), "pid", c.Pid())
				c.Signal(sig)
			}
		}
	}
}

// suspend passes Ctrl-Z on: it stops the child's group with SIGSTOP, then
// stops this process, as a job stops, so that the shell's fg (a SIGCONT,
// which leaderrun forwards) resumes both. The child never runs while
// leaderrun is stopped; a tenure whose deadline passed meanwhile ends at
// once on resumption, before any store call.
func (l *leader) suspend() {
	if c := l.current(); c != nil {
		l.log.Info("suspended (SIGTSTP); stopping the command too", "pid", c.Pid())
		c.Signal(syscall.SIGSTOP)
	}
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}

// stop asks the loop to stop the child with sig (0: the stop signal) and
// end. Only the first call counts.
func (l *leader) stop(sig syscall.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stopping:
	default:
		if sig == 0 {
			sig = l.cfg.StopSignal
		}
		l.stopSig = sig
		close(l.stopping)
		l.report.stopping()
	}
}

// stopReason says why a tenure ended when leaderrun was told to stop.
func (l *leader) stopReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "stop signal " + signals.Name(l.stopSig)
}

func (l *leader) current() child {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.child
}

// setCurrent publishes the child that signals are forwarded to.
func (l *leader) setCurrent(c child) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.child = c
}

func (l *leader) stopped() bool {
	select {
	case <-l.stopping:
		return true
	default:
		return false
	}
}

// run opens the store, then runs tenures until told to stop.
func (l *leader) run() error {
	store, err := l.openStore()
	if err != nil {
		return err
	}
	defer store.Close()
	l.keepSecrets(store)
	l.useStore(store)
	rc := l.cfg
	l.report.campaigning()
	l.log.Info("campaigning", "store", store.Describe(), "ttl", rc.LeaseDuration,
		"renew_interval", rc.RetryPeriod, "renew_deadline", rc.RenewDeadline, "kill_grace", rc.KillGrace)
	return l.loop()
}

// keepSecrets blanks, in this process's environment, the variables that may
// hold the store's credentials, now that the store has read them: the
// child does not inherit them (childEnv drops leaderrun's own options
// besides), and /proc/PID/environ no longer shows them.
func (l *leader) keepSecrets(store lease.Store) {
	keys := []string{"LEADERRUN_STORE"}
	if c, ok := store.(lease.Credentialed); ok {
		keys = append(keys, c.CredentialEnv()...)
	}
	if err := environ.Scrub(keys...); err != nil {
		l.log.Warn("cannot blank the store's credentials in /proc/self/environ", "err", err)
	}
}

// useStore makes the loop campaign in store.
func (l *leader) useStore(store lease.Store) {
	rc := l.cfg
	l.elector = &lease.Elector{
		Store: store, Name: rc.Name, Holder: l.holder,
		LeaseDuration: rc.LeaseDuration, RenewDeadline: rc.RenewDeadline, RetryPeriod: rc.RetryPeriod,
		Logger: l.log, Observe: l.report.storeCall, Clock: l.clock,
	}
}

// openStore opens the store, retrying while it is merely unreachable. A
// store that refuses (bad DSN, credentials, privileges) ends the run; so
// does a stop signal (cleanly) and --acquire-timeout.
func (l *leader) openStore() (lease.Store, error) {
	ctx, cancel := l.campaignContext()
	defer cancel()
	backoff := 250 * time.Millisecond
	for {
		store, err := lease.Open(ctx, l.dsn)
		switch {
		case err == nil:
			return store, nil
		case errors.Is(err, lease.ErrRefused):
			return nil, fmt.Errorf("open store: %w", err)
		case ctx.Err() != nil:
			return nil, l.campaignError(ctx, err)
		}
		l.log.Warn("store unreachable; retrying", "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
		case <-ctx.Done():
			return nil, l.campaignError(ctx, ctx.Err())
		}
	}
}

// loop runs tenures until told to stop, --once, or an error that no retry
// can fix.
func (l *leader) loop() error {
	failures := 0
	previous := "none" // how this replica's previous tenure ended
	for {
		started := time.Now()
		ten, err := l.campaign()
		if err != nil {
			return err
		}
		electedAt := time.Now()
		log := l.log.With("token", ten.Token())
		l.report.elected(ten.Token())
		log.Info("elected; starting command", "campaign_waited", time.Since(started).Round(time.Millisecond),
			"previous_tenure", previous, "command", strings.Join(l.cfg.Command, " "))
		end := l.serve(ten, log)
		if l.holding(end) {
			l.hold(ten, log, electedAt.Add(l.cfg.HoldAtLeast), end.why)
		} else {
			l.release(ten, log, end.why)
		}
		l.report.ended(ten, end.status, end.exited)
		if end.startErr != nil && l.cfg.Once {
			return end.startErr
		}
		previous = end.why
		status := end.status
		switch {
		case l.cfg.Once || end.stopped:
			return &childExit{status}
		case l.stopped():
			// The stop came after this tenure had ended for another
			// reason: there was no child left to stop.
			l.log.Info("stopped while standing by")
			return context.Canceled
		}
		if !end.exited {
			continue // lost the tenure: stand by for the next one
		}
		if status.ExitCode() == 0 {
			failures = 0
		} else {
			failures++
		}
		delay := restartDelay(l.cfg.RestartDelay, failures)
		if failures >= 2 {
			// A crash loop: say so where --log-level warn looks.
			log.Warn("command keeps failing; backing off before campaigning again", "consecutive_failures", failures,
				"delay", delay, "last", end.why)
		} else {
			log.Info("campaigning again after the restart delay", "delay", delay, "consecutive_failures", failures)
		}
		select {
		case <-time.After(delay):
		case <-l.stopping:
			l.log.Info("stopped while standing by")
			return context.Canceled // no child to stop: exit 0, as documented
		}
	}
}

// campaign waits for the name, for at most --acquire-timeout.
func (l *leader) campaign() (*lease.Tenure, error) {
	ctx, cancel := l.campaignContext()
	defer cancel()
	ten, err := l.elector.Campaign(ctx)
	if err != nil {
		return nil, l.campaignError(ctx, err)
	}
	return ten, nil
}

// campaignContext ends on a stop signal or after --acquire-timeout.
func (l *leader) campaignContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-l.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	if l.cfg.AcquireTimeout <= 0 {
		return ctx, cancel
	}
	tctx, tcancel := context.WithTimeoutCause(ctx, l.cfg.AcquireTimeout, errAcquireTimeout)
	return tctx, func() { tcancel(); cancel() }
}

// campaignError explains why a campaign in ctx ended with err. A stop
// signal while standing by ends the run cleanly (context.Canceled, exit 0).
func (l *leader) campaignError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errAcquireTimeout):
		return fmt.Errorf("lease %q: %w (%v)", l.cfg.Name, errAcquireTimeout, l.cfg.AcquireTimeout)
	case l.stopped():
		l.log.Info("stopped while standing by")
		return context.Canceled
	}
	return err
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
}

// serve runs the command for one tenure and returns how it ended once it
// and every descendant are dead.
func (l *leader) serve(ten *lease.Tenure, log *slog.Logger) (end tenureEnd) {
	// Hold mu from fork to publication, so that a signal arriving as the
	// child starts waits for it instead of finding no child to forward to.
	l.mu.Lock()
	child, err := l.start(supervise.Spec{
		Path:         l.cfg.Command[0],
		Args:         l.cfg.Command,
		Env:          l.childEnv(ten),
		StopSignal:   l.cfg.StopSignal,
		KillGrace:    l.cfg.KillGrace,
		Logger:       log,
		PIDNamespace: l.cfg.PIDNamespace,
	})
	if err == nil {
		l.child = child
	}
	l.mu.Unlock()
	if err != nil {
		// Not the end of leaderrun: give the name back so that another
		// replica can lead, and try again after the restart delay.
		log.Error("command did not start; handing the name back", "err", err)
		code := ExitNotExecutable
		if errors.Is(err, supervise.ErrNotFound) {
			code = ExitNotFound
		}
		return tenureEnd{startErr: err, exited: true, status: supervise.Status{Code: code}, why: "command did not start"}
	}
	defer l.setCurrent(nil)

	select {
	case <-child.Done():
		end = tenureEnd{status: child.Stop(), exited: true} // Stop kills what the command left behind
		log.Info("command exited", "status", end.status.String())
		end.why = "command " + end.status.String()
		return end
	case <-ten.Context().Done():
		cause := context.Cause(ten.Context())
		end.why = cause.Error()
		level := slog.LevelWarn
		if errors.Is(cause, lease.ErrSteppedDown) {
			level = slog.LevelInfo // planned: an operator asked for it
		}
		log.Log(context.Background(), level, "tenure ended; stopping command", "cause", end.why)
		end.status = child.Stop()
	case <-l.stopping:
		end.stopped, end.why = true, l.stopReason()
		end.status = child.StopWith(l.stopSig)
	}
	log.Info("command stopped", "status", end.status.String())
	return end
}

// holding reports whether a tenure that ended so keeps the name for
// --hold-at-least: not when it was lost, or when an operator asked it to
// step down.
func (l *leader) holding(end tenureEnd) bool {
	return l.cfg.HoldAtLeast > 0 && (end.exited || end.stopped)
}

// hold keeps renewing the tenure until `until` (or until it is lost, or a
// stop signal comes), then stops renewing without releasing: nobody else
// takes the name before until, nor before the lease expires after it. The
// child and its descendants are dead by now.
func (l *leader) hold(ten *lease.Tenure, log *slog.Logger, until time.Time, why string) {
	if wait := time.Until(until); wait > 0 {
		log.Info("command over; holding the lease for --hold-at-least", "why", why,
			"hold", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ten.Context().Done():
		case <-l.stopping:
		}
	}
	ten.Abandon()
	log.Info("tenure over; left the lease to expire, for --hold-at-least", "why", why)
}

// release hands the name back; the child and its descendants are dead by
// now. Its log line is the tenure's last and says why the tenure ended. A
// failed release never changes the exit status.
func (l *leader) release(ten *lease.Tenure, log *slog.Logger, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := ten.Release(ctx); {
	case err == nil:
		log.Info("tenure over; released the lease", "why", why)
	case errors.Is(err, lease.ErrLost):
		log.Info("tenure over; the lease was no longer ours to release", "why", why)
	default:
		log.Warn("tenure over; could not release the lease, it expires on its own", "why", why, "err", err)
	}
}

// childEnv is this process's environment without leaderrun's own options
// (which may hold a store password), plus the tenure's identity.
func (l *leader) childEnv(ten *lease.Tenure) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"LEADERRUN_NAME="+l.cfg.Name,
		"LEADERRUN_HOLDER="+l.holder,
		"LEADERRUN_TOKEN="+strconv.FormatInt(ten.Token(), 10))
}

// defaultIdentity is host:pid:random, unique to this process's tenure.
func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}
