package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Causes with which a Tenure's context ends; see context.Cause.
var (
	// ErrDeadline: no acquire or renew succeeded within RenewDeadline of
	// being sent, so the holder can no longer be sure it holds the name.
	ErrDeadline = errors.New("renew deadline passed")
	// ErrReleased: the holder released the name.
	ErrReleased = errors.New("lease released")
	// ErrSteppedDown: an operator asked the holder to hand the name over
	// (Store.RequestStepDown). The store still grants the name to the
	// tenure until it is released or expires; release it once what the
	// tenure protects has stopped.
	ErrSteppedDown = errors.New("asked to step down")
	// ErrHandedOff: the tenure's partition left the owner's target, and
	// the owner hands it to another member (Owner). The store still
	// grants it until it is released.
	ErrHandedOff = errors.New("handed off")
	// ErrAbandoned: the holder stopped renewing without releasing, to
	// keep the name from others until the lease expires (Tenure.Abandon).
	ErrAbandoned = errors.New("left to expire")
)

// Elector campaigns for one name on behalf of one holder. The zero value is
// not usable; fill in Store, Name, Holder and the three durations, which
// must satisfy 0 < RetryPeriod < RenewDeadline < LeaseDuration (Validate;
// package config checks the full timing rule).
type Elector struct {
	Store  lease.Store
	Name   string
	Holder string

	// LeaseDuration is the TTL the store writes on acquire and renew.
	LeaseDuration time.Duration
	// RenewDeadline is how long a holder trusts its tenure after sending
	// its last successful acquire or renew.
	RenewDeadline time.Duration
	// RetryPeriod is the renew interval, measured from the start of one
	// attempt to the start of the next, and the base of error back-off.
	RetryPeriod time.Duration

	// Logger receives the election's log lines; nil discards them.
	Logger *slog.Logger
	// Clock measures trust; nil means BootClock.
	Clock lease.Clock
	// Prover, when set, watches a holder that annotated its record with
	// where it runs (Store.Annotate) while Campaign waits for it: when it
	// proves the holder dead, or its tenure ended, Campaign takes the name
	// over at once with Store.Seize instead of at the lease's expiry, or
	// after the release reached it through the store. Nil: a crashed
	// holder's name is free when its lease expires.
	Prover Prover

	// Candidacy is what this replica says of itself to the others
	// (priority, preemption; see Preference in preference.go): its
	// ineligibility is SetIneligible's. The zero value: priority 0,
	// eligible, no preemption.
	Candidacy lease.Candidacy
	// PreemptDelay is how long a replica with Candidacy.Preempt campaigns
	// before it asks a holder it precedes to step down for it.
	PreemptDelay time.Duration

	// Observe, when set, is called after every acquire, seize, renew and
	// release with the operation's name ("acquire", "seize", "renew",
	// "release"), how long
	// the store took, and the outcome (a *HeldError counts as an answer).
	// It runs on the election's goroutines and must not block.
	Observe func(op string, took time.Duration, err error)

	// answered records that the store answered a call once: from then on,
	// refusals are retried (a read-only switchover passes), before it they
	// end the campaign (a configuration that can never work).
	answered bool
	// unsure records that an Acquire or Seize failed without an answer
	// since the last tenure started: the store may have granted it (see
	// lostGrant).
	unsure bool
	// granted is the token of the last tenure this Elector started.
	granted int64
	// cand is this replica's published candidacy (preference.go).
	cand candidacy
	// saidOtherNamespace records that Campaign said, at info level, that
	// a leader in another PID namespace cannot be watched: once is news,
	// every tenure after it is not. Set by watches' goroutines.
	saidOtherNamespace atomic.Bool
}

// Validate reports the first field of e that cannot work: a missing Store,
// Name or Holder, or durations outside 0 < RetryPeriod < RenewDeadline <
// LeaseDuration. Campaign calls it first.
func (e *Elector) Validate() error {
	switch {
	case e.Store == nil:
		return errors.New("elector: no Store")
	case e.Name == "":
		return errors.New("elector: no Name")
	case e.RetryPeriod <= 0:
		return fmt.Errorf("elector: RetryPeriod %v must be positive", e.RetryPeriod)
	case e.RenewDeadline <= e.RetryPeriod:
		return fmt.Errorf("elector: RenewDeadline %v must be longer than RetryPeriod %v", e.RenewDeadline, e.RetryPeriod)
	case e.LeaseDuration <= e.RenewDeadline:
		return fmt.Errorf("elector: LeaseDuration %v must be longer than RenewDeadline %v", e.LeaseDuration, e.RenewDeadline)
	}
	return lease.CheckIdentity(e.Holder)
}

// maxJitter bounds the random delay a follower adds to a known expiry, so
// that followers woken together do not all hit the store at once.
const maxJitter = 50 * time.Millisecond

// Campaign blocks until holder acquires the name, and returns the tenure.
// A held name makes it sleep until the holder's known expiry or until the
// store reports a change, whichever is first; with a Prover, also until
// the Prover proves the holder dead or its tenure ended, or has the
// holder's word that it is ending its tenure, and then it takes the name
// at once (Store.Seize), returning the tenure once the proof is complete.
// Store errors are logged and retried with capped exponential back-off.
// Errors wrapping ErrRefused end the campaign only while the store has
// never answered this Elector (a configuration that cannot work); later
// they are retried like any other.
// An Acquire whose reply was lost may have been granted: Campaign releases
// such a grant when it finds it (a record naming its Holder under a token
// it never learned, read after an Acquire or Seize of unknown outcome) and
// campaigns again at once, instead of waiting for it to expire.
// Campaign returns ctx's error when ctx ends first, and ErrClosed when the
// store was closed.
func (e *Elector) Campaign(ctx context.Context) (*Tenure, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	log := e.logger()
	backoff := e.RetryPeriod / 4
	var leader lease.Record // last tenure seen, to say each change once (sameStandby)
	var watch *holderWatch  // the Prover's watch of the tenure that holds the name
	defer func() { watch.stop() }()
	for {
		sent := e.clock()()
		actx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
		rec, err := e.Store.Acquire(actx, e.Name, e.Holder, e.LeaseDuration)
		cancel()
		e.observe("acquire", e.clock()()-sent, err)
		e.introduce(ctx)
		if err == nil {
			e.answered = true
			ten := e.newTenure(rec, sent, false)
			if e.deferGrant(ctx, ten, e.preferred(ctx), log) {
				continue
			}
			return ten.handOut(), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.unsure = e.unsure || unknownOutcome(err)
		var held *lease.HeldError
		switch {
		case errors.As(err, &held) && lostGrant(held.Record, e.Holder, e.unsure, e.granted):
			e.answered = true
			if err := releaseLostGrant(ctx, e.Store, held.Record, e.RetryPeriod, e.clock(), e.observe, log); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				sleep := backoff/2 + rand.N(backoff/2+1)
				log.Warn("store unavailable; retrying", "err", err, "retry_in", sleep.Round(time.Millisecond))
				backoff = min(2*backoff, 2*e.RetryPeriod)
				if err := lease.Sleep(ctx, sleep); err != nil {
					return nil, err
				}
				continue
			}
			e.unsure = false
		case errors.As(err, &held):
			e.answered = true
			e.unsure = e.unsure && held.Record.Holder == e.Holder
			backoff = e.RetryPeriod / 4
			sleep := held.Record.Remaining + rand.N(maxJitter)
			if !sameStandby(held.Record, leader) {
				e.logHeld(log, held.Record)
			}
			leader = held.Record
			e.seenAgain(ctx)
			e.preempt(ctx, held.Record, log)
			switch in := e.preemptIn(held.Record); {
			case in > 0:
				sleep = min(sleep, in)
			case in == 0: // the candidates could not be read: try again
				sleep = min(sleep, e.RetryPeriod)
			}
			watch = e.watchHolder(ctx, watch, held.Record, log)
			proved, err := e.waitHeld(ctx, held.Record, sleep, watch)
			if err != nil {
				return nil, err
			}
			if !proved {
				if watch.othersTake() {
					// The change is most likely the takeover by the
					// follower that claimed the end signal, whose
					// command is starting: an Acquire now (a store
					// write) would compete with that start.
					if err := lease.Sleep(ctx, StartQuiet); err != nil {
						return nil, err
					}
				}
				continue
			}
			ten, pref, err := e.seize(ctx, watch, log)
			e.unsure = e.unsure || unknownOutcome(err)
			switch {
			case err == nil && e.deferGrant(ctx, ten, pref, log):
				watch.spent = true
			case err == nil:
				return ten.handOut(), nil
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case errors.Is(err, errSettleLost):
				watch.spent = true
			case errors.As(err, &held):
				// A reservation keeps the name from this holder, or the
				// tenure changed: campaign as usual.
				watch.spent = true
				log.Info("the leader on this host is gone, but the store refused the takeover; waiting as usual", "err", err)
			case errors.Is(err, lease.ErrClosed):
				return nil, err
			default:
				// The proof stands; the next round tries Seize again.
				sleep := backoff/2 + rand.N(backoff/2+1)
				log.Warn("store unavailable; retrying", "err", err, "retry_in", sleep.Round(time.Millisecond))
				backoff = min(2*backoff, 2*e.RetryPeriod)
				if err := lease.Sleep(ctx, sleep); err != nil {
					return nil, err
				}
			}
		case errors.Is(err, lease.ErrClosed):
			return nil, err
		case errors.Is(err, lease.ErrRefused) && !e.answered:
			return nil, fmt.Errorf("acquire lease %q: %w", e.Name, err)
		default:
			sleep := backoff/2 + rand.N(backoff/2+1)
			msg := "store unavailable; retrying"
			switch {
			case errors.Is(err, lease.ErrLocked):
				msg = "the lease is locked in the store by an open transaction (a fenced transaction of the old leader's child?); waiting for it to end"
			case errors.Is(err, lease.ErrRefused):
				msg = "store refuses the request; retrying, as it may pass (a read-only switchover, a privilege being restored)"
			}
			log.Warn(msg, "err", err, "retry_in", sleep.Round(time.Millisecond))
			backoff = min(2*backoff, 2*e.RetryPeriod)
			if err := lease.Sleep(ctx, sleep); err != nil {
				return nil, err
			}
		}
	}
}

// successorAttr is the log attribute naming a step-down's successor, or
// none when the step-down names none (any other replica may take the
// name), rather than successor="".
func successorAttr(successor string) []any {
	if successor == "" {
		return nil
	}
	return []any{"successor", successor}
}

// roundLogged rounds a logged duration to milliseconds, or to
// microseconds below one, so that a fast call does not read "took=0s".
func roundLogged(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// sameStandby reports whether a follower that said logHeld's line of a has
// nothing new to say of b: the same holder's tenure, released or not. The
// leader's record of where its command runs (Annotate, just after the
// command starts) and a step-down request change the record, not the line.
func sameStandby(a, b lease.Record) bool {
	return a.Holder == b.Holder && a.Token == b.Token && a.Released == b.Released
}

func (e *Elector) logHeld(log *slog.Logger, r lease.Record) {
	if r.Released {
		log.Info("lease reserved for another after a step-down; standing by", append(successorAttr(r.Successor),
			"excluded", r.Excluded, "free_in", r.Remaining.Round(time.Millisecond))...)
		return
	}
	if r.Holder == e.Holder {
		// Not a grant of this elector's (Campaign checked lostGrant).
		log.Warn("the lease is held under this replica's own identity, by an earlier run of it that did not release "+
			"(it crashed?) or by another replica started with the same identity, which must be unique; standing by",
			"leader_token", r.Token, "expires_in", r.Remaining.Round(time.Millisecond))
		return
	}
	log.Info("lease held by another; standing by", "leader", r.Holder,
		"leader_token", r.Token, "expires_in", r.Remaining.Round(time.Millisecond))
}

func (e *Elector) clock() lease.Clock {
	if e.Clock != nil {
		return e.Clock
	}
	return lease.BootClock
}

func (e *Elector) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (e *Elector) observe(op string, took time.Duration, err error) {
	if e.Observe != nil {
		e.Observe(op, took, err)
	}
}
