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
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/samehost"
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

// mode is how a replica runs: one name (leader) or its partitions
// (partitioned).
type mode interface {
	// run opens the store and runs until told to stop or an error that
	// no retry can fix.
	run() error
	stop(sig syscall.Signal)
	relaySignals(sigs <-chan os.Signal, quit <-chan struct{})
}

// runLeader campaigns, runs the command while leading (one per partition
// owned, with --partitions), and returns the child's final status as
// *childExit, or the error that ended the run.
func runLeader(ctx context.Context, sigs <-chan os.Signal, rc runConfig, log *slog.Logger) error {
	dsn := rc.Store
	if dsn == "" {
		var path string
		dsn, path = defaultStore()
		log.Info("using this user's default SQLite store; only processes of this user on this host take part in the election",
			"path", path, "uid", os.Geteuid())
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
	if rc.NamespaceWarning != "" {
		log.Warn("the command runs without a PID namespace of its own", "why", rc.NamespaceWarning,
			"hint", "--pid-namespace=false turns it off and this warning with it")
	}
	supervise.ReclaimCgroups(log) // what a SIGKILLed leaderrun's command left
	r := newReplica(rc, holder, log)
	r.dsn, r.byDefault = dsn, rc.Store == ""
	var m mode = newLeader(r)
	if rc.Partitions > 0 {
		m = newPartitioned(r)
	}
	var g run.Group
	quit := make(chan struct{})
	g.Add(func() error { m.relaySignals(sigs, quit); return nil },
		func(error) { close(quit) })
	g.Add(m.run, func(error) { m.stop(0) })
	if rc.HTTPAddr != "" {
		ln, err := observe.Listen(rc.HTTPAddr)
		if err != nil {
			return &usageError{err}
		}
		r.log.Info("serving /healthz, "+r.report.obs.Routes()+" and /metrics", "addr", ln.Addr().String())
		r.report.obs.SetLogger(r.log)
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return r.report.obs.Serve(ctx, ln) }, func(error) { cancel() })
	}
	wctx, wcancel := context.WithCancel(ctx)
	g.Add(func() error { r.report.watchdog(wctx); <-wctx.Done(); return nil }, func(error) { wcancel() })
	return g.Run()
}

// replica is what both modes share: the options, this replica's identity,
// what it reports, how it starts commands, and the stop request.
type replica struct {
	cfg runConfig
	dsn string
	// byDefault is set when dsn is the default store (--store not given).
	byDefault bool
	log       *slog.Logger
	holder    string
	report    *reporter
	start     func(supervise.Spec) (child, error) // startChild, or a fake
	clock     lease.Clock                         // nil: lease.BootClock

	mu       sync.Mutex     // guards stopSig, received, stopping's closing and the modes' children
	stopSig  syscall.Signal // what the commands get
	received syscall.Signal // the stop signal leaderrun received, when it differs from stopSig
	stopping chan struct{}  // closed when leaderrun was told to stop
	// children returns the running commands, which signals are
	// forwarded to; it takes mu.
	children func() []child
}

func newReplica(rc runConfig, holder string, log *slog.Logger) *replica {
	return &replica{
		cfg: rc, holder: holder,
		log:      log.With("name", rc.Name, "holder", holder),
		report:   newReporter(rc.Name, holder, rc.RenewDeadline),
		start:    startChild,
		stopping: make(chan struct{}),
		children: func() []child { return nil },
	}
}

// relaySignals forwards signals to the running commands until quit closes.
// The first stop signal (--stop-on) instead makes the mode stop them, with
// the signal signals.PassOn says; later ones are forwarded like any other
// (a second Ctrl-C reaches the commands while they wind down).
func (r *replica) relaySignals(sigs <-chan os.Signal, quit <-chan struct{}) {
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
			for _, c := range r.children() {
				r.log.Debug("forwarding signal", "signal", signals.Name(sig), "pid", c.Pid())
				c.Signal(sig)
			}
		}
	}
}

// suspend passes Ctrl-Z on: it stops the commands' groups with SIGSTOP,
// then stops this process, as a job stops, so that the shell's fg (a
// SIGCONT, which leaderrun forwards) resumes them all. No command runs
// while leaderrun is stopped; a tenure whose deadline passed meanwhile
// ends at once on resumption, before any store call.
func (r *replica) suspend() {
	for _, c := range r.children() {
		r.log.Info("suspended (SIGTSTP); stopping the command too", "pid", c.Pid())
		c.Signal(syscall.SIGSTOP)
	}
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}

// stop asks the mode to stop its commands with sig (0: the stop signal)
// and end. Only the first call counts.
func (r *replica) stop(sig syscall.Signal) {
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
func (r *replica) stopReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.received != 0 {
		return "stop signal " + signals.Name(r.received) + " (the command got " + signals.Name(r.stopSig) + ")"
	}
	return "stop signal " + signals.Name(r.stopSig)
}

func (r *replica) stopped() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// keepSecrets blanks the store's credentials in this process's environment
// now that the store has read them (see scrubCredentials).
func (r *replica) keepSecrets(store lease.Store) {
	if err := scrubCredentials(store); err != nil {
		r.log.Warn("cannot blank the store's credentials in /proc/self/environ", "err", err)
	}
}

// checkMode refuses to run this replica's name in this mode while replicas
// run it in the other (see checkMode), asking the store for a retry
// period at most.
func (r *replica) checkMode(store lease.Store, partitioned bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RetryPeriod)
	defer cancel()
	return checkMode(ctx, store, r.cfg.Name, partitioned)
}

// openStore opens the store, retrying while it is merely unreachable. A
// store that refuses (bad DSN, credentials, privileges) ends the run; so
// does a stop signal (cleanly) and --acquire-timeout.
func (r *replica) openStore() (lease.Store, error) {
	ctx, cancel := r.campaignContext()
	defer cancel()
	backoff := 250 * time.Millisecond
	for {
		store, err := lease.Open(ctx, r.dsn)
		switch {
		case err == nil:
			r.keepSecrets(store)
			return store, nil
		case errors.Is(err, lease.ErrRefused) && r.byDefault:
			return nil, fmt.Errorf("open store: %w", defaultStoreError(err))
		case errors.Is(err, lease.ErrRefused):
			return nil, fmt.Errorf("open store: %w", err)
		case ctx.Err() != nil:
			return nil, r.campaignError(ctx, err)
		}
		r.log.Warn("store unreachable; retrying", "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
		case <-ctx.Done():
			return nil, r.campaignError(ctx, ctx.Err())
		}
	}
}

// campaignContext ends on a stop signal or after --acquire-timeout.
func (r *replica) campaignContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-r.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	if r.cfg.AcquireTimeout <= 0 {
		return ctx, cancel
	}
	tctx, tcancel := context.WithTimeoutCause(ctx, r.cfg.AcquireTimeout, errAcquireTimeout)
	return tctx, func() { tcancel(); cancel() }
}

// campaignError explains why a campaign in ctx ended with err. A stop
// signal while standing by ends the run cleanly (context.Canceled, exit 0).
func (r *replica) campaignError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errAcquireTimeout):
		return fmt.Errorf("lease %q: %w (%v)", r.cfg.Name, errAcquireTimeout, r.cfg.AcquireTimeout)
	case r.stopped():
		r.log.Info("stopped while standing by")
		return context.Canceled
	}
	return err
}

// leader runs the campaign → tenure → release cycle for one name.
type leader struct {
	*replica
	elector *lease.Elector // set by run once the store is open
	child   child          // the running command; guarded by mu
}

func newLeader(r *replica) *leader {
	l := &leader{replica: r}
	r.children = func() []child {
		r.mu.Lock()
		defer r.mu.Unlock()
		if l.child == nil {
			return nil
		}
		return []child{l.child}
	}
	return l
}

// run opens the store, then runs tenures until told to stop.
func (l *leader) run() error {
	store, err := l.openStore()
	if err != nil {
		return err
	}
	defer store.Close()
	if err := l.checkMode(store, false); err != nil {
		return err
	}
	l.useStore(store)
	rc := l.cfg
	l.report.campaigning()
	l.log.Info("campaigning", "store", store.Describe(), "ttl", rc.LeaseDuration,
		"renew_interval", rc.RetryPeriod, "renew_deadline", rc.RenewDeadline, "kill_grace", rc.KillGrace)
	return l.loop()
}

// useStore makes the loop campaign in store.
func (l *leader) useStore(store lease.Store) {
	rc := l.cfg
	l.elector = &lease.Elector{
		Store: store, Name: rc.Name, Holder: l.holder,
		LeaseDuration: rc.LeaseDuration, RenewDeadline: rc.RenewDeadline, RetryPeriod: rc.RetryPeriod,
		Logger: l.log, Observe: l.report.storeCall, Clock: l.clock,
		Prover: &samehost.Prover{Logger: l.log},
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
		log := l.log.With("token", ten.Token())
		if l.stopped() {
			// The stop signal came as the campaign won (a follower
			// stopped together with its leader may take the name at the
			// leader's stopping word): start nothing, hand the name on.
			l.release(ten, log, "stop signal before the command started", false)
			l.log.Info("stopped while standing by")
			return context.Canceled
		}
		electedAt := time.Now()
		l.report.elected(ten.Token())
		log.Info("elected; starting command", "campaign_waited", time.Since(started).Round(time.Millisecond),
			"previous_tenure", previous, "command", strings.Join(l.cfg.Command, " "))
		sig := l.endSignal(log)
		go l.announceStop(ten, sig)
		end := l.serve(ten, l.childEnv(ten), log, func(c child) {
			l.child = c
			if c != nil {
				go l.annotate(ten, c, sig, log)
			}
		}, l.stopping)
		released := false
		if l.holding(end) {
			l.hold(ten, log, electedAt.Add(l.cfg.HoldAtLeast), end.why)
		} else {
			released = l.handBack(ten, end, sig, log)
		}
		sig.Send()
		l.report.ended(ten, end.status, end.exited)
		if end.startErr != nil && l.cfg.Once {
			return end.startErr
		}
		previous = end.why
		status := end.status
		switch {
		case end.stopped:
			if released {
				l.awaitSuccessor(ten)
			}
			return &childExit{status}
		case l.cfg.Once:
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
		delay := l.countExit(&failures, end, log, "campaigning again")
		select {
		case <-time.After(delay):
		case <-l.stopping:
			l.log.Info("stopped while standing by")
			return context.Canceled // no child to stop: exit 0, as documented
		}
	}
}

// successorWait bounds how long a leader stopped by a signal waits, after
// its release, for the successor's command to run before it closes the
// store and exits.
const successorWait = 100 * time.Millisecond

// successorQuiet is how long after its release a stopped leader leaves the
// store alone before it first looks for the successor: a hand-off takes
// about 10 ms, and a read sooner finds no successor yet while it competes
// with the successor's read, acquire and start for the store's CPU (and,
// on a shared host, for the host's): the pause made PostgreSQL's hand-off
// faster in alternating benchmark runs (bench/findings.md).
const successorQuiet = 20 * time.Millisecond

// announceStop tells the followers on this host, through the tenure's end
// signal, when a stop signal or a step-down that names no successor
// (openStepDown) begins to end the tenure: the one that claims it takes
// the name at once, while this replica's command stops, and starts its own
// once the end signal or this process's death says that command's tree is
// gone (a seize on PostgreSQL took 2 ms, the command's stop about 1 ms:
// bench/findings.md). It returns when the tenure ends.
func (l *leader) announceStop(ten *lease.Tenure, sig *samehost.EndSignal) {
	if sig == nil {
		return
	}
	select {
	case <-l.stopping:
		if ten.Context().Err() == nil {
			ten.Yield()
			sig.Stopping()
		}
	case <-ten.Context().Done():
		if openStepDown(ten) {
			sig.Stopping() // the tenure no longer renews: nothing to yield
		}
	}
}

// openStepDown reports whether ten ended at a step-down request that names
// no successor. Its reservation, in the record since the request, keeps
// only this replica out, and a Seize honours it: a follower on this host
// may take the name at the end signal, as after a stop signal. A successor
// named with --to may run on another host, and another follower here may
// claim the end signal first: the release, through the store, reaches it.
func openStepDown(ten *lease.Tenure) bool {
	rec, ok := ten.StepDownRequest()
	return ok && rec.Successor == ""
}

// handBack ends a tenure whose command's whole tree is gone: it sends the
// end signal, so that a follower on this host may take the name before a
// release reaches it through the store (unless a release is to reserve
// the name for another: a step-down with a successor, a partition's
// hand-off; then after it), and releases. It reports whether the name was
// released or taken over.
func (l *leader) handBack(ten *lease.Tenure, end tenureEnd, sig *samehost.EndSignal, log *slog.Logger) bool {
	if end.reserved && !openStepDown(ten) {
		return l.release(ten, log, end.why, false)
	}
	watched := sig.Watched()
	sig.Send()
	if watched && l.handedOver(ten) {
		l.letGo(ten, end)
		log.Info("tenure over; a follower on this host took the name at our end signal", "why", end.why)
		return true
	}
	return l.release(ten, log, end.why, true)
}

// letGo ends a tenure that a follower took at the end signal. A replica
// that campaigns on (its command exited, or it stepped down) releases it:
// the store refuses (ErrLost), and lets go of what it kept for the tenure,
// which on MySQL is the named lock that waiters on the store block on
// until it is freed or the old lease expires. One that exits leaves it
// (its sessions end with it) and stays off the new command's start.
func (l *leader) letGo(ten *lease.Tenure, end tenureEnd) {
	if end.stopped || l.cfg.Once || l.stopped() {
		ten.Abandon()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	ten.Release(ctx) // ErrLost: the name is the follower's
}

// handOverLook is how long after its end signal a leader that a follower
// on this host watches first leaves the store alone, and handOverWait how
// long in all it waits for that follower's seize before it releases: a
// release sent at once raced the seize for the record (and, on PostgreSQL,
// woke every listener) while the seize had to commit, and slowed it.
const (
	handOverLook = 5 * time.Millisecond
	handOverWait = 50 * time.Millisecond
)

// handedOver reports whether another holder took the name after ten within
// handOverWait of its end signal.
func (l *leader) handedOver(ten *lease.Tenure) bool {
	return l.awaitNewer(ten, handOverLook, handOverWait, func(lease.Record) bool { return true })
}

// awaitSuccessor returns once another replica's command runs under the name
// (the record shows a newer tenure, and where its command runs), or after
// successorWait. Until then the store's connections stay open: closing a
// PostgreSQL connection ends a server process, which costs the server
// milliseconds of CPU (OpenSSL's cleanup, unmapping its memory), two or
// three per replica. Closed at once, those land on the successor's read,
// its acquire and its command's start, and slow the hand-off. It first
// reads after successorQuiet. It returns at once when the store says
// nobody else campaigns for the name, so that a lone --once run's SIGTERM
// does not wait for nobody.
func (l *leader) awaitSuccessor(ten *lease.Tenure) {
	if !l.othersCampaign() {
		l.log.Debug("no other replica campaigns for the name; not waiting for a successor")
		return
	}
	l.awaitNewer(ten, successorQuiet, successorWait, func(r lease.Record) bool { return r.Where != "" })
}

// othersCampaign reports whether another replica is a live candidate for
// the name, or the store cannot tell (it is no lease.CandidateReader, or
// its answer did not come within successorWait).
func (l *leader) othersCampaign() bool {
	cr, ok := l.elector.Store.(lease.CandidateReader)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), successorWait)
	defer cancel()
	found, err := cr.OtherCandidates(ctx, l.cfg.Name, l.holder)
	return err != nil || found
}

// awaitNewer leaves the store alone for quiet, then reads until the record
// shows a tenure newer than ten for which ok holds (true), or until limit
// (from the call) has passed or the store fails (false).
func (l *leader) awaitNewer(ten *lease.Tenure, quiet, limit time.Duration, ok func(lease.Record) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	time.Sleep(quiet)
	store := l.elector.Store
	for {
		rec, err := store.Get(ctx, l.cfg.Name)
		switch {
		case err != nil:
			return false
		case rec.Held() && rec.Token > ten.Token() && ok(rec):
			return true
		}
		if store.Wait(ctx, l.cfg.Name, rec, limit) != nil || ctx.Err() != nil {
			return false
		}
	}
}

// endSignal opens the tenure's end signal (package samehost), or returns nil:
// without one, a graceful hand-over reaches a follower through the store
// only. A tenure held for --hold-at-least gets none: its name must stay
// taken until its lease expires.
func (l *leader) endSignal(log *slog.Logger) *samehost.EndSignal {
	if l.cfg.HoldAtLeast > 0 {
		return nil
	}
	sig, err := samehost.NewEndSignal()
	if err != nil {
		log.Debug("no end signal for followers on this host; a hand-over reaches them through the store", "err", err)
		return nil
	}
	return sig
}

// annotateAfter is how long after its command's fork a leader records
// where it runs. The record is a store write that wakes every follower,
// and each reads the record back: done at the fork, that work competes
// with the new command's exec and start for the host's CPU, and waiting
// made the hand-off faster in alternating benchmark runs
// (bench/findings.md). Should this process die
// before then, the name passes at the lease's expiry, as it would have
// within the write's own few milliseconds.
const annotateAfter = 20 * time.Millisecond

// annotate records in the tenure's record, annotateAfter after the
// command's start, where this process and its command c run and its end
// signal sig (package samehost), so that a follower on this host can take the
// name over at once should this process die or end the tenure; without
// it, a crash hands the name over at the lease's expiry. It retries a
// failed store call every renew interval, and ends with the tenure.
func (l *leader) annotate(ten *lease.Tenure, c child, sig *samehost.EndSignal, log *slog.Logger) {
	started, ok := c.(interface{ StartTime() uint64 })
	if !ok {
		return // a fake in the loop's tests
	}
	w, err := samehost.Here(c.Pid(), started.StartTime())
	if err != nil {
		log.Debug("cannot tell where the command runs; should this process die, the name passes at the lease's expiry", "err", err)
		return
	}
	w = sig.Mark(w)
	select {
	case <-time.After(annotateAfter):
	case <-ten.Context().Done():
		return
	}
	for {
		ctx, cancel := context.WithTimeout(ten.Context(), l.cfg.RetryPeriod)
		err := ten.Annotate(ctx, w.String())
		cancel()
		switch {
		case err == nil:
			log.Debug("recorded where the command runs, for followers on this host", "where", w.String())
			return
		case ten.Context().Err() != nil, errors.Is(err, lease.ErrLost):
			return
		}
		log.Warn("cannot record where the command runs; retrying (until then, should this process die, the name passes at the lease's expiry)", "err", err)
		select {
		case <-time.After(l.cfg.RetryPeriod):
		case <-ten.Context().Done():
			return
		}
	}
}

// countExit counts a command that ended on its own into failures (its
// consecutive failures; 0 after a success) and returns the restart delay
// before what comes next (again), which it logs: a crash loop at warning
// level, where --log-level warn looks.
func (r *replica) countExit(failures *int, end tenureEnd, log *slog.Logger, again string) time.Duration {
	if end.status.ExitCode() == 0 {
		*failures = 0
	} else {
		*failures++
	}
	delay := restartDelay(r.cfg.RestartDelay, *failures)
	if *failures >= 2 {
		log.Warn("command keeps failing; backing off before "+again, "consecutive_failures", *failures,
			"delay", delay, "last", end.why)
	} else {
		log.Info(again+" after the restart delay", "delay", delay, "consecutive_failures", *failures)
	}
	return delay
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
}

// serve runs the command for one tenure, with env, and returns how it
// ended once it and every descendant are dead. publish is called with the
// command once it started, and with nil once it ended, with mu held.
// stopping tells serve to stop the command at once (nil: the tenure's end
// says when, as a partition's hand-off on leaving); then, and when the
// tenure ends after a stop signal, the command gets that signal.
func (r *replica) serve(ten *lease.Tenure, env []string, log *slog.Logger, publish func(child), stopping <-chan struct{}) (end tenureEnd) {
	// Hold mu from fork to publication, so that a signal arriving as the
	// child starts waits for it instead of finding no child to forward to.
	r.mu.Lock()
	child, err := r.start(supervise.Spec{
		Path:       r.cfg.Command[0],
		Args:       r.cfg.Command,
		Env:        env,
		StopSignal: r.cfg.StopSignal,
		KillGrace:  r.cfg.KillGrace,
		Logger:     log,
		Namespace:  r.cfg.Namespace,
		Proved:     ten.Seized(),
	})
	if err == nil {
		publish(child)
	}
	r.mu.Unlock()
	if err != nil {
		// Not the end of leaderrun: give the lease back so that another
		// replica can take it, and try again after the restart delay.
		log.Error("command did not start; handing the lease back", "err", err)
		code := ExitNotExecutable
		if errors.Is(err, supervise.ErrNotFound) {
			code = ExitNotFound
		}
		return tenureEnd{startErr: err, exited: true, status: supervise.Status{Code: code}, why: "command did not start"}
	}
	defer func() {
		r.mu.Lock()
		publish(nil)
		r.mu.Unlock()
	}()

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
		if errors.Is(cause, lease.ErrSteppedDown) || errors.Is(cause, lease.ErrHandedOff) {
			level = slog.LevelInfo // planned: an operator or a hand-off asked for it
			end.reserved = true
		}
		log.Log(context.Background(), level, "tenure ended; stopping command", "cause", end.why)
		if r.stopped() {
			end.status = child.StopWith(r.signal())
		} else {
			end.status = child.Stop()
		}
	case <-stopping:
		end.stopped, end.why = true, r.stopReason()
		end.status = child.StopWith(r.signal())
	}
	log.Info("command stopped", "status", end.status.String())
	return end
}

// signal is the signal leaderrun was stopped with.
func (r *replica) signal() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopSig
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

// release hands the name back, and reports whether it did, or whether a
// follower on this host took it first after the end signal (signalled);
// the child and its descendants are dead by now. Its log line is the
// tenure's last and says why the tenure ended. A failed release never
// changes the exit status.
func (r *replica) release(ten *lease.Tenure, log *slog.Logger, why string, signalled bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	switch err := ten.Release(ctx); {
	case err == nil:
		log.Info("tenure over; released the lease", "why", why)
		return true
	case errors.Is(err, lease.ErrLost) && signalled:
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
func (r *replica) childEnv(ten *lease.Tenure, extra ...string) []string {
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
