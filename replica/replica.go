// Package replica runs one replica of a leaderrun deployment: it campaigns
// for a name (or, with partitions, joins the name's group), runs the
// command while it holds the name (one per partition it owns), stops it
// when the tenure ends, and hands the name on: to a follower on this host
// at once, through the same-host proof that the old command's tree is dead
// (package samehost), or through the store.
//
// A Replica is built from a Config by New and run by Run, which returns
// the command's final status as an *Exit, or the error that ended the
// run: ErrAcquireTimeout, a *ConfigError, one of package lease's or
// package supervise's. Package cmd maps those to exit codes; it wires Run,
// RelaySignals and Serve into one actor group.
package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/signals"
	"github.com/leaderrun/leaderrun/supervise"
)

// Config is everything a replica needs beyond the validated options.
type Config struct {
	config.Config
	StopSignal syscall.Signal
	StopOn     signals.StopOn // received signals that stop; the rest are forwarded
	// Namespace is what --pid-namespace chose; NamespaceWarning, when not
	// empty, says why the default could not tie the command's tree to
	// leaderrun's life.
	Namespace        supervise.Namespace
	NamespaceWarning string
	// Hooks, when set, hears of each tenure's command (one name only,
	// not --partitions): package podlabel's leader label.
	Hooks Hooks
}

// Hooks hears of each tenure's command. Started is called once the
// command runs, with the replica's lock held: it must not wait. Ended is
// called once the command and its whole tree are dead, before the name is
// handed on (released, taken at the end signal, or held for
// --hold-at-least): the hand-off waits for it, so it must wait briefly if
// at all.
type Hooks interface {
	Started()
	Ended()
}

// mode is how a replica runs: one name (single) or its partitions
// (partitioned).
type mode interface {
	// run opens the store and runs until told to stop or an error that
	// no retry can fix.
	run() error
}

// Replica is one replica: what both modes share (the options, this
// replica's identity, what it reports, how it starts commands, the stop
// request) and the mode that runs it.
type Replica struct {
	cfg  Config
	mode mode
	dsn  string
	// byDefault is set when dsn is the default store (--store not given).
	byDefault bool
	log       *slog.Logger
	holder    string
	report    *reporter
	start     func(supervise.Spec) (child, error) // startChild, or a fake
	ahead     *ahead                              // the next start, made ready while standing by; nil: none
	clock     lease.Clock                         // nil: lease.BootClock

	mu       sync.Mutex     // guards stopSig, received, stopping's closing and the modes' children
	stopSig  syscall.Signal // what the commands get
	received syscall.Signal // the stop signal leaderrun received, when it differs from stopSig
	stopping chan struct{}  // closed when leaderrun was told to stop
	// children returns the running commands, which signals are
	// forwarded to; it takes mu.
	children func() []child
	// stopWord, when set (under mu) by the mode, tells the followers on
	// this host that the tenure ends at a stop signal (see announceStop):
	// the stop signal's goroutine calls it before it logs.
	stopWord func()
	// stopAsked: relaySignals is stopping the replica. It sets it before
	// it gives the commands their stop signal (Deliver) and before it
	// closes stopping: a command that ends meanwhile ends at that signal,
	// not on its own (serve).
	stopAsked atomic.Bool
	// deliver: the mode's commands get the stop signal from relaySignals
	// itself (Deliver), ahead of their tenures' ends. The partitioned mode
	// hands each partition off in order instead.
	deliver bool
	// starting is read-locked by each start of a command until the
	// command is published, and write-locked to relay a signal (commands):
	// a signal that arrives as a command starts waits for it, instead of
	// finding no command to forward to, while commands start in parallel
	// (a replica that takes over a dead member's partitions starts dozens
	// at once).
	starting sync.RWMutex
}

// New checks that the command can run (its error is supervise's: exit 127
// or 126, before campaigning) and returns the replica that runs it: in the
// default store when cfg.Store is empty, under a host:pid:random identity
// when cfg.Identity is.
func New(cfg Config, log *slog.Logger) (*Replica, error) {
	dsn := cfg.Store
	if dsn == "" {
		var path string
		dsn, path = DefaultStore()
		log.Info("using this user's default SQLite store; only processes of this user on this host take part in the election",
			"path", path, "uid", os.Geteuid())
	}
	holder := cfg.Identity
	if holder == "" {
		holder = defaultIdentity()
	}
	if err := supervise.Check(supervise.Spec{Path: cfg.Command[0]}); err != nil {
		return nil, err
	}
	if err := environ.Hide(); err != nil {
		log.Warn("cannot make this process non-dumpable; other processes of its user can read its memory", "err", err)
	}
	if cfg.NamespaceWarning != "" {
		log.Warn("the command runs without a PID namespace of its own", "why", cfg.NamespaceWarning,
			"hint", "--pid-namespace=false turns it off and this warning with it")
	}
	supervise.ReclaimCgroups(log) // what a SIGKILLed leaderrun's command left
	r := newReplica(cfg, holder, log)
	r.dsn, r.byDefault = dsn, cfg.Store == ""
	if cfg.Partitions > 0 {
		newPartitioned(r)
	} else {
		r.ahead = newAhead(r)
		newSingle(r)
	}
	return r, nil
}

func newReplica(cfg Config, holder string, log *slog.Logger) *Replica {
	return &Replica{
		cfg: cfg, holder: holder,
		log:      log.With("name", cfg.Name, "holder", holder),
		report:   newReporter(cfg.Name, holder, cfg.RenewDeadline),
		start:    startChild,
		stopping: make(chan struct{}),
		children: func() []child { return nil },
	}
}

// Run campaigns (or joins the group), runs the command while leading, and
// returns the command's final status as *Exit, or the error that ended the
// run; context.Canceled when a stop came while no command ran.
func (r *Replica) Run() error {
	r.logStart()
	return r.mode.run()
}

// logStart says how the replica is configured, first: before the store
// answers, which an unreachable one may take its whole dial timeout to
// say (etcd's is 10 s).
func (r *Replica) logStart() {
	rc := r.cfg
	attrs := []any{"store", lease.Sketch(r.dsn), "ttl", rc.LeaseDuration, "renew_interval", rc.RetryPeriod,
		"renew_deadline", rc.RenewDeadline, "kill_grace", rc.KillGrace}
	if rc.Partitions > 0 {
		attrs = append(attrs, "partitions", rc.Partitions)
	}
	r.log.Info("starting", attrs...)
}

// Stop asks the replica to stop its commands with sig (0: the stop
// signal) and Run to return. Only the first call counts; it is safe for
// concurrent use.
func (r *Replica) Stop(sig syscall.Signal) { r.stop(sig) }

// RelaySignals forwards sigs to the running commands, or stops the
// replica at a stop signal (see relaySignals), until quit closes.
func (r *Replica) RelaySignals(sigs <-chan os.Signal, quit <-chan struct{}) {
	r.relaySignals(sigs, quit)
}

// Serve serves /healthz, /leader or /partitions and /metrics on ln until
// ctx ends.
func (r *Replica) Serve(ctx context.Context, ln net.Listener) error {
	r.log.Info("serving /healthz, "+r.report.obs.Routes()+" and /metrics", "addr", ln.Addr().String())
	r.report.obs.SetLogger(r.log)
	return r.report.obs.Serve(ctx, ln)
}

// Watchdog sends systemd's keep-alive while the store answers, until ctx
// ends; it returns at once when no watchdog is configured.
func (r *Replica) Watchdog(ctx context.Context) { r.report.watchdog(ctx) }

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
