package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// ErrRefused marks a store error that retrying cannot fix: a missing
// privilege, a read-only store, a schema it cannot use. Campaign returns
// such errors instead of retrying them.
var ErrRefused = errors.New("store refused")

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
)

// Elector campaigns for one name on behalf of one holder. The zero value is
// not usable; fill in Store, Name, Holder and the three durations, which
// must satisfy RetryPeriod < RenewDeadline < LeaseDuration (package config
// validates the full timing rule).
type Elector struct {
	Store  Store
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
	Clock Clock
	// Observe, when set, is called after every acquire, renew and release
	// with the operation's name ("acquire", "renew", "release"), how long
	// the store took, and the outcome (a *HeldError counts as an answer).
	// It runs on the election's goroutines and must not block.
	Observe func(op string, took time.Duration, err error)
}

// maxJitter bounds the random delay a follower adds to a known expiry, so
// that followers woken together do not all hit the store at once.
const maxJitter = 50 * time.Millisecond

// Campaign blocks until holder acquires the name, and returns the tenure.
// A held name makes it sleep until the holder's known expiry or until the
// store reports a change, whichever is first. Store errors are logged and
// retried with capped exponential back-off; only errors wrapping ErrRefused
// end the campaign. Campaign returns ctx's error when ctx ends first.
func (e *Elector) Campaign(ctx context.Context) (*Tenure, error) {
	log := e.logger()
	backoff := e.RetryPeriod / 4
	var leader string // last holder seen, to log each change once
	for {
		sent := e.clock()()
		actx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
		rec, err := e.Store.Acquire(actx, e.Name, e.Holder, e.LeaseDuration)
		cancel()
		e.observe("acquire", e.clock()()-sent, err)
		if err == nil {
			return e.newTenure(rec, sent), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var held *HeldError
		switch {
		case errors.As(err, &held):
			backoff = e.RetryPeriod / 4
			sleep := held.Record.Remaining + rand.N(maxJitter)
			if held.Record.Holder != leader {
				leader = held.Record.Holder
				if held.Record.Released {
					log.Info("lease reserved for another after a step-down; standing by",
						"successor", held.Record.Successor, "excluded", held.Record.Excluded,
						"free_in", held.Record.Remaining.Round(time.Millisecond))
				} else {
					log.Info("lease held by another; standing by", "leader", leader,
						"leader_token", held.Record.Token, "expires_in", held.Record.Remaining.Round(time.Millisecond))
				}
			}
			if err := e.Store.Wait(ctx, e.Name, sleep); err != nil {
				return nil, err
			}
		case errors.Is(err, ErrRefused):
			return nil, fmt.Errorf("acquire lease %q: %w", e.Name, err)
		default:
			sleep := backoff/2 + rand.N(backoff/2+1)
			log.Warn("store unavailable; retrying", "err", err, "retry_in", sleep.Round(time.Millisecond))
			backoff = min(2*backoff, 2*e.RetryPeriod)
			if err := sleepCtx(ctx, sleep); err != nil {
				return nil, err
			}
		}
	}
}

func (e *Elector) clock() Clock {
	if e.Clock != nil {
		return e.Clock
	}
	return BootClock
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
