package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// watchTick bounds how late a tenure notices that its deadline passed after
// the host was suspended: Go's timers do not count suspended time, the
// deadline's clock does, so the tenure re-reads the clock at least this
// often.
const watchTick = 100 * time.Millisecond

// Tenure is one holder's hold on a name, from a successful acquire until the
// name is released or trust ends. While it lasts, the lease is renewed every
// RetryPeriod in the background: by the tenure itself, or, for a partition,
// by its Owner's renewal round, which reports each outcome to it. Its
// Context ends the moment trust ends.
type Tenure struct {
	// Record is the store's record as granted by Acquire.
	Record lease.Record

	e      *Elector
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release to end run
	done   chan struct{} // closed when run has returned

	// results carries the outcomes of renewals, sent by run's own
	// attempts or, when external, by the owner's rounds (report).
	results  chan renewal
	external bool
	// asked carries the record that showed a step-down request, from
	// noticeStepDown to run.
	asked chan lease.Record
	// over, when set, is called once the tenure is given up (Release,
	// Abandon, StepAside): its Owner stops claiming it.
	over     func()
	overOnce sync.Once
	// seized: taken with Seize after a Prover's proof that the previous
	// tenure's processes are gone.
	seized bool
	// yielding: the holder told a follower it may take the name (Yield).
	yielding atomic.Bool
	// stepDown is the record that showed the step-down request that ended
	// the tenure; run sets it before it ends ctx with ErrSteppedDown.
	stepDown lease.Record
	// deadline is run's renew deadline, on the Elector's clock, for
	// Trusted.
	deadline atomic.Int64
}

// Trusted reports whether the holder may still trust the tenure: it has
// not ended, and its renew deadline has not passed, by the clock read now.
// A holder that has just been continued after a stop asks it before
// anything the tenure protects runs again: the tenure's own goroutine
// may not have read the clock since.
func (t *Tenure) Trusted() bool {
	return t.ctx.Err() == nil && t.e.clock()() < time.Duration(t.deadline.Load())
}

// StepDownRequest returns the record that showed the step-down request
// that ended the tenure (its Successor, its reservation), once Context has
// ended with ErrSteppedDown. It reports false before, for any other end,
// and for a partition's tenure, which its Owner ends.
func (t *Tenure) StepDownRequest() (lease.Record, bool) {
	if !errors.Is(context.Cause(t.ctx), ErrSteppedDown) || t.stepDown.Token == 0 {
		return lease.Record{}, false
	}
	return t.stepDown, true
}

// Yield says that the holder has told a follower it may take the name
// while what the tenure protects stops (an end signal's stopping word,
// package samehost): a renewal that then finds the name taken ends the
// tenure as Abandon does, with ErrAbandoned, not as a loss. The tenure
// renews as before until then.
func (t *Tenure) Yield() { t.yielding.Store(true) }

// Seized reports whether the tenure was taken with Seize, after a proof
// that the previous holder on this host was gone, or done, with every
// process it ran.
func (t *Tenure) Seized() bool { return t.seized }

// newTenure starts the tenure of rec, granted by a call sent at sent. An
// external tenure does not renew itself: report tells it the outcome of
// each renewal.
func (e *Elector) newTenure(rec lease.Record, sent time.Duration, external bool) *Tenure {
	e.granted, e.unsure = rec.Token, false
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &Tenure{Record: rec, e: e, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}),
		results: make(chan renewal, 1), external: external, asked: make(chan lease.Record)}
	t.deadline.Store(int64(sent + e.RenewDeadline))
	go t.run(sent)
	return t
}

// handOut starts the watch for step-down requests (noticeStepDown) of a
// tenure that Campaign returns, StartQuiet later. Not at the grant: its
// first read would run beside the grant's own (deferGrant's), and a store
// with a pool of connections would dial a second one on the hand-off's
// path. Nor at once: every store's Wait reads the record first, and the
// command starts when Campaign returns. A request made meanwhile shows in
// that first read.
func (t *Tenure) handOut() *Tenure {
	go func() {
		if lease.Sleep(t.ctx, StartQuiet) == nil {
			t.noticeStepDown()
		}
	}()
	return t
}

// stepDownWait bounds each Store.Wait of noticeStepDown: the wake-up
// channel tells it of a request; the bound only limits how long a lost
// notification can go unnoticed (renewals notice it too).
const stepDownWait = time.Minute

// noticeStepDown waits on the store's wake-up channel (Store.Wait) for a
// step-down request for this tenure, and hands the record that shows it
// to run: a holder learns of the request at once, not at its next
// renewal. It reads the record after each wake-up, and ends when the
// tenure does, when it yields, or when the record names another tenure
// (renewals tell run).
func (t *Tenure) noticeStepDown() {
	e := t.e
	seen := t.Record
	for {
		err := e.Store.Wait(t.ctx, e.Name, seen, stepDownWait)
		if t.ctx.Err() != nil || errors.Is(err, lease.ErrClosed) || t.yielding.Load() {
			// A yielded tenure ends whatever a request says, and the
			// wake-up is most likely the follower's takeover: a read
			// now would compete with its command's start.
			return
		}
		rctx, cancel := context.WithTimeout(t.ctx, e.RetryPeriod)
		rec, err := e.Store.Get(rctx, e.Name)
		cancel()
		switch {
		case t.ctx.Err() != nil:
			return
		case err != nil:
			// The store is in trouble; renewals decide what that means.
			if lease.Sleep(t.ctx, e.RetryPeriod) != nil {
				return
			}
			continue
		case rec.Holder != e.Holder || rec.Token != t.Record.Token || rec.Released:
			return
		case rec.StepDown:
			select {
			case t.asked <- rec:
			case <-t.ctx.Done():
			}
			return
		}
		seen = rec
	}
}

// report tells an external tenure the outcome of a renewal sent at sent:
// rec on success, or err (ErrLost when the store says the tenure is over).
func (t *Tenure) report(sent time.Duration, rec lease.Record, err error) {
	select {
	case t.results <- renewal{sent: sent, rec: rec, err: err}:
	case <-t.done:
	}
}

// end ends the tenure's context with cause, unless it ended already.
func (t *Tenure) end(cause error) { t.cancel(cause) }

// Token is the tenure's fencing token.
func (t *Tenure) Token() int64 { return t.Record.Token }

// Context ends when the tenure ends. context.Cause(ctx) says why: ErrLost
// (the store says another holder has it or it expired), ErrDeadline (no
// renewal succeeded in time), ErrSteppedDown (a renewal reported a
// step-down request; the name is still this tenure's until Release) or
// ErrReleased.
func (t *Tenure) Context() context.Context { return t.ctx }

// Release stops renewing, ends the tenure's context with ErrReleased (unless
// it already ended) and hands the name back so a follower can take it at
// once. It returns ErrLost when the store no longer had the name for this
// tenure. Call it only after everything the tenure protects has stopped.
// Release may be called more than once; later calls only repeat the store
// call.
func (t *Tenure) Release(ctx context.Context) error {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
	t.cancel(ErrReleased)
	start := t.e.clock()()
	err := t.e.Store.Release(ctx, t.e.Name, t.e.Holder, t.Record.Token)
	t.e.observe("release", t.e.clock()()-start, err)
	t.given()
	if err != nil && lease.PassesThrough(err) {
		// The store's own errors name the operation and the lease; the
		// sentinels it passes through do not.
		return fmt.Errorf("release lease %q: %w", t.e.Name, err)
	}
	return err
}

// StepAside releases the name after asking the store to keep this holder
// from it for window (a step-down reservation against itself), so that
// another holder takes it meanwhile: for a partition whose work keeps
// failing here. It returns the release's error.
func (t *Tenure) StepAside(ctx context.Context, window time.Duration) error {
	if _, err := t.e.Store.RequestStepDown(ctx, t.e.Name, "", window); err != nil {
		t.e.logger().Warn("cannot step aside; releasing only", "err", err)
	}
	return t.Release(ctx)
}

// given tells the tenure's owner, once, that it is given up.
func (t *Tenure) given() {
	if t.over != nil {
		t.overOnce.Do(t.over)
	}
}

// Abandon stops renewing and ends the tenure's context with ErrAbandoned,
// without releasing: the name stays the holder's in the store until the
// lease expires, up to LeaseDuration after the last renewal. Call it only
// after everything the tenure protects has stopped.
func (t *Tenure) Abandon() {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
	t.cancel(ErrAbandoned)
	t.given()
}

type renewal struct {
	sent time.Duration
	rec  lease.Record
	err  error
}

// run owns the tenure's deadline. It returns when the tenure ends or
// Release closes stop; it never outlives a renew attempt by more than that
// attempt's timeout.
func (t *Tenure) run(sent time.Duration) {
	defer close(t.done)
	e, clock := t.e, t.e.clock()
	log := e.logger().With("token", t.Record.Token)
	deadline := sent + e.RenewDeadline
	nextRenew := sent + e.RetryPeriod

	attempts, cancelAttempts := context.WithCancel(context.Background())
	defer cancelAttempts()
	inflight := false
	renewing := !t.external // this goroutine renews the lease

	for {
		now := clock()
		if now >= deadline {
			log.Warn("renew deadline passed; trust ended", "since_last_renew_sent", (now - deadline + e.RenewDeadline).Round(time.Millisecond))
			t.cancel(ErrDeadline)
			return
		}
		if renewing && !inflight && now >= nextRenew {
			inflight = true
			nextRenew = now + e.RetryPeriod
			go t.renew(attempts, now, min(e.RetryPeriod, deadline-now), t.results)
		}
		wait := min(deadline-now, watchTick)
		if renewing && !inflight {
			wait = min(wait, nextRenew-now)
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.ctx.Done(): // ended by its owner (a hand-off)
			timer.Stop()
			return
		case rec := <-t.asked:
			log.Info("asked to step down", append(successorAttr(rec.Successor),
				"reserved_for", rec.Reserved.Round(time.Millisecond), "noticed", "by the store's wake-up")...)
			t.stepDown = rec
			t.cancel(ErrSteppedDown)
			timer.Stop()
			return
		case r := <-t.results:
			inflight = false
			switch {
			case r.err == nil && r.rec.StepDown:
				log.Info("asked to step down", append(successorAttr(r.rec.Successor),
					"reserved_for", r.rec.Reserved.Round(time.Millisecond))...)
				t.stepDown = r.rec
				t.cancel(ErrSteppedDown)
				timer.Stop()
				return
			case r.err == nil:
				deadline = max(deadline, r.sent+e.RenewDeadline)
				t.deadline.Store(int64(deadline))
				log.Debug("renewed", "took", roundLogged(clock()-r.sent),
					"expires_in", r.rec.Remaining.Round(time.Millisecond))
			case errors.Is(r.err, lease.ErrLost) && t.yielding.Load():
				log.Info("a follower took the name while the command stops", "err", r.err)
				t.cancel(ErrAbandoned)
				timer.Stop()
				return
			case errors.Is(r.err, lease.ErrLost):
				log.Warn("lease lost", "err", r.err)
				t.cancel(lease.ErrLost)
				timer.Stop()
				return
			default:
				log.Warn("renew failed; will retry", "err", r.err,
					"trust_left", (deadline - clock()).Round(time.Millisecond))
			}
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

func (t *Tenure) renew(ctx context.Context, sent, timeout time.Duration, results chan<- renewal) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rec, err := t.e.Store.Renew(ctx, t.e.Name, t.e.Holder, t.Record.Token, t.e.LeaseDuration)
	t.e.observe("renew", t.e.clock()()-sent, err)
	if err == nil && ctx.Err() != nil {
		// The reply came after the attempt's timeout: the outcome is not
		// one the deadline arithmetic may rely on.
		err = ctx.Err()
	}
	results <- renewal{sent: sent, rec: rec, err: err}
	if err == nil {
		t.e.publish(ctx) // a holder's priority stays known to a replica that may preempt it
	}
}

// Annotate records where, for a follower on the same host, in the tenure's
// record (Store.Annotate). It returns ErrLost when the tenure is over in
// the store.
func (t *Tenure) Annotate(ctx context.Context, where string) error {
	if err := t.e.Store.Annotate(ctx, t.e.Name, t.e.Holder, t.Record.Token, where); err != nil {
		return fmt.Errorf("annotate lease %q: %w", t.e.Name, err)
	}
	return nil
}
