package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// watchTick bounds how late a tenure notices that its deadline passed after
// the host was suspended: Go's timers do not count suspended time, the
// deadline's clock does, so the tenure re-reads the clock at least this
// often.
const watchTick = 100 * time.Millisecond

// Tenure is one holder's hold on a name, from a successful acquire until the
// name is released or trust ends. While it lasts, it renews the lease every
// RetryPeriod in the background. Its Context ends the moment trust ends.
type Tenure struct {
	// Record is the store's record as granted by Acquire.
	Record Record

	e      *Elector
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release to end run
	done   chan struct{} // closed when run has returned
}

func (e *Elector) newTenure(rec Record, sent time.Duration) *Tenure {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &Tenure{Record: rec, e: e, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{})}
	go t.run(sent)
	return t
}

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
	if err != nil {
		return fmt.Errorf("release lease %q: %w", t.e.Name, err)
	}
	return nil
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
}

type renewal struct {
	sent time.Duration
	rec  Record
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
	results := make(chan renewal, 1)
	inflight := false

	for {
		now := clock()
		if now >= deadline {
			log.Warn("renew deadline passed; trust ended", "since_last_renew_sent", (now - deadline + e.RenewDeadline).Round(time.Millisecond))
			t.cancel(ErrDeadline)
			return
		}
		if !inflight && now >= nextRenew {
			inflight = true
			nextRenew = now + e.RetryPeriod
			go t.renew(attempts, now, min(e.RetryPeriod, deadline-now), results)
		}
		wait := min(deadline-now, watchTick)
		if !inflight {
			wait = min(wait, nextRenew-now)
		}
		timer := time.NewTimer(wait)
		select {
		case r := <-results:
			inflight = false
			switch {
			case r.err == nil && r.rec.StepDown:
				log.Info("asked to step down", "successor", r.rec.Successor,
					"reserved_for", r.rec.Reserved.Round(time.Millisecond))
				t.cancel(ErrSteppedDown)
				timer.Stop()
				return
			case r.err == nil:
				deadline = max(deadline, r.sent+e.RenewDeadline)
				log.Debug("renewed", "took", (clock() - r.sent).Round(time.Millisecond),
					"expires_in", r.rec.Remaining.Round(time.Millisecond))
			case errors.Is(r.err, ErrLost):
				log.Warn("lease lost", "err", r.err)
				t.cancel(ErrLost)
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
