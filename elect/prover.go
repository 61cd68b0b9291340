package elect

import (
	"github.com/leaderrun/leaderrun/lease"

	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Prover proves, on the host where a tenure's holder runs, that the tenure
// is over before its lease expires: that the holder is dead, or has ended
// the tenure, and that everything it ran is gone. Campaign asks it about
// every held record that carries a Where (Store.Annotate) and, once it has
// proved that, takes the name with Store.Seize instead of waiting for the
// lease to expire or the release to reach it. Package samehost implements it
// for holders on this host.
type Prover interface {
	// Prove blocks while rec's holder lives and holds its tenure, and
	// returns a nil error once it has proved the holder dead, or (ended
	// true) that the living holder has ended its tenure, and in both
	// cases the processes it ran gone, so that nothing of the tenure can
	// act any more. It returns another error as soon as it knows it
	// cannot prove that (rec.Where names another host, or processes it
	// cannot verify or signal): the follower then waits for the release
	// or the expiry. A holder that is only frozen (SIGSTOP) is alive. It
	// returns ctx's error promptly when ctx ends first.
	//
	// When the living holder announces that it is ending its tenure (it
	// is stopping its processes) and this follower is the one on the host
	// to take the name, Prove calls ending, once, and goes on: the
	// follower may take the name at once (Store.Seize), so that the store
	// write overlaps the old processes' stop, but must act on it only
	// after Prove has returned nil, or once the lease of rec would have
	// expired.
	Prove(ctx context.Context, rec lease.Record, ending func()) (ended bool, err error)
}

// ErrElsewhere is wrapped by a Prove error that says the holder runs on
// another host, as is normal where replicas run on several hosts: Campaign
// logs it at debug level only.
var ErrElsewhere = errors.New("the leader runs on another host")

// ErrOtherNamespace is wrapped by a Prove error that
// says the holder runs on this host but in another PID namespace: replicas
// in containers of their own that share a store's volume. Nothing from here
// can watch it, so a crash hands over only at the lease's expiry, which an
// operator may not expect of replicas on one host: Campaign says so at
// info level, once per Elector.
var ErrOtherNamespace = errors.New("the leader runs on this host in another PID namespace")

// ErrCommandGone is wrapped by a Prove error that says the holder lives
// but its command, as its record names it, has exited (no process has its
// pid): the holder is ending its tenure, or restarting its
// command and about to record the new one. Campaign logs it at debug level
// only: a watch of the holder's next record follows.
var ErrCommandGone = errors.New("the leader's command has exited")

// ErrOtherTakes is Prove's error when another follower on the holder's
// host proved the same ended tenure first and takes the name: this one
// waits for the store to show the new holder (or, should that follower
// fail, the holder's release).
var ErrOtherTakes = errors.New("another follower on this host takes the name at the leader's end signal")

// holderWatch is a Prove of one tenure, running while Campaign waits for
// that tenure to end. One watch lives across the campaign's rounds for as
// long as they see the same tenure: a Prove holds what it verified while
// the holder lived, and could not verify it again after the holder's death.
type holderWatch struct {
	rec    lease.Record
	cancel context.CancelFunc
	done   chan struct{} // closed when Prove has returned
	err    error         // Prove's result; read only after done is closed
	ended  bool          // Prove's result: the holder lives, its tenure ended
	// ending is closed when Prove reported the holder's word that it is
	// ending its tenure: the name may be seized before the proof is done.
	ending     chan struct{}
	endingOnce sync.Once
	// spent: the store refused the Seize that followed the proof (a
	// step-down reservation for another): wait for the name as usual.
	spent bool
}

// watchHolder returns the watch of rec's tenure: w when it watches that
// tenure already, else a new one (nil when there is nothing to prove:
// no Prover, a record that is not held, has no Where or is this holder's
// own), stopping w.
func (e *Elector) watchHolder(ctx context.Context, w *holderWatch, rec lease.Record, log *slog.Logger) *holderWatch {
	// A step-down request changes the record, not the tenure the watch
	// proves gone: the watch stays, with a stopping word it may have
	// claimed as the leader began to stop at that request.
	if w != nil {
		asked := rec
		asked.StepDown = w.rec.StepDown
		if lease.SameTenure(w.rec, asked) {
			return w
		}
	}
	w.stop()
	if e.Prover == nil || rec.Where == "" || !rec.Held() || rec.Holder == e.Holder {
		return nil // nothing to prove, or this holder's own tenure (--hold-at-least)
	}
	wctx, cancel := context.WithCancel(ctx)
	w = &holderWatch{rec: rec, cancel: cancel, done: make(chan struct{}), ending: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.ended, w.err = e.Prover.Prove(wctx, rec, func() { w.endingOnce.Do(func() { close(w.ending) }) })
		switch {
		case w.err == nil || wctx.Err() != nil:
			return
		case errors.Is(w.err, ErrOtherTakes):
			log.Debug("the leader on this host ended its tenure; another follower on this host takes the name",
				"leader", rec.Holder, "leader_token", rec.Token)
			return
		}
		level := slog.LevelInfo
		switch {
		case errors.Is(w.err, ErrOtherNamespace):
			if e.saidOtherNamespace.Swap(true) {
				level = slog.LevelDebug
			}
			log.Log(context.Background(), level, "the leader runs on this host in another PID namespace (another container?) and cannot be watched from here; a crash hands over at the lease's expiry, up to the lease duration",
				"leader", rec.Holder, "leader_token", rec.Token, "lease_duration", e.LeaseDuration)
			return
		case errors.Is(w.err, ErrElsewhere) || errors.Is(w.err, ErrCommandGone):
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, "cannot watch the leader on this host; a crash hands over at the lease's expiry",
			"leader", rec.Holder, "leader_token", rec.Token, "why", w.err)
	}()
	return w
}

// stop ends the watch and waits for its Prove to return. A nil watch does
// nothing.
func (w *holderWatch) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// proved reports whether the Seize may be tried: Prove has proved the
// holder dead or its tenure over, or has the holder's word that it is
// ending its tenure.
func (w *holderWatch) proved() bool {
	if w == nil || w.spent {
		return false
	}
	select {
	case <-w.ending:
		return true
	default:
		return w.complete()
	}
}

// complete reports whether Prove has returned its proof that the holder's
// processes are gone.
func (w *holderWatch) complete() bool {
	select {
	case <-w.done:
		return w.err == nil
	default:
		return false
	}
}

// othersTake reports whether Prove returned ErrOtherTakes: another
// follower on the holder's host takes the name at its end signal.
func (w *holderWatch) othersTake() bool {
	if w == nil {
		return false
	}
	select {
	case <-w.done:
		return errors.Is(w.err, ErrOtherTakes)
	default:
		return false
	}
}

// StartQuiet is about a new command's start: how long, at a takeover, a
// replica leaves the store alone before a call that can wait, so that the
// call does not compete with that start for the host's CPU and the
// store's. A follower that another one on the host beat to the end signal
// waits so long once the record changes before it campaigns again (should
// the other fail to take the name, the leader's release comes later
// still), and a tenure that Campaign returns waits so long before it
// watches for step-down requests (handOut).
const StartQuiet = 20 * time.Millisecond

// waitHeld waits, as Store.Wait does, for rec's tenure to change or for
// timeout; with a watch, also for the point where the Seize may be tried
// (proved), and reports that.
func (e *Elector) waitHeld(ctx context.Context, rec lease.Record, timeout time.Duration, w *holderWatch) (proved bool, err error) {
	if w.proved() {
		return true, nil
	}
	if w == nil || w.spent {
		return false, e.Store.Wait(ctx, e.Name, rec, timeout)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.ending:
			cancel()
		case <-w.done:
			if w.err == nil {
				cancel()
			}
		case <-wctx.Done():
		}
	}()
	err = e.Store.Wait(wctx, e.Name, rec, timeout)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case w.proved():
		return true, nil
	case errors.Is(err, context.Canceled):
		return false, nil
	}
	return false, err
}

// seize takes the name from the holder that w proved dead or done, or
// that announced the end of its tenure. In that last case the old
// processes may still be stopping: it returns the new tenure only once
// the proof is complete (settle). It returns too deferGrant's answer
// (preferred), read first: while the old command stops, not after.
func (e *Elector) seize(ctx context.Context, w *holderWatch, log *slog.Logger) (*Tenure, preference, error) {
	pref := e.preferred(ctx)
	sent := e.clock()()
	sctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
	rec, err := e.Store.Seize(sctx, e.Name, e.Holder, w.rec, e.LeaseDuration)
	cancel()
	e.observe("seize", e.clock()()-sent, err)
	if err != nil {
		return nil, pref, err
	}
	t := e.newTenure(rec, sent, false)
	switch {
	case !w.complete():
		log.Info("took over the lease from the leader on this host, which is stopping its command; ours starts once that one is gone",
			"leader", w.rec.Holder, "leader_token", w.rec.Token)
		proved, err := e.settle(ctx, t, w, log)
		if err != nil {
			return nil, pref, err
		}
		if !proved {
			return t, pref, nil // not Seized: nothing says the old processes are gone
		}
		// The takeover is said; the Prover's lines say how the old tree
		// ended.
	case w.ended:
		log.Info("took over the lease at once from the leader on this host, which ended its tenure",
			"leader", w.rec.Holder, "leader_token", w.rec.Token)
	default:
		log.Info("took over the lease from a dead leader on this host", "dead_leader", w.rec.Holder,
			"dead_token", w.rec.Token)
	}
	t.seized = true
	return t, pref, nil
}

// errSettleLost ends a settle whose tenure ended before the proof was
// complete: Campaign campaigns on.
var errSettleLost = errors.New("the seized tenure ended before the old leader's command was gone")

// settle waits, after a Seize at the holder's word that it was ending its
// tenure, for w's Prove to return, and reports whether it proved the old
// processes gone. Without that proof (an error, or a holder frozen before
// it could finish) it waits until a full LeaseDuration after the Seize
// returned, when, with the replicas' shared --ttl, the old lease would
// have expired at the latest: what waiting for the expiry without the
// fast path would have given. The seized tenure renews meanwhile. It
// returns errSettleLost when the tenure ends first, and ctx's error when
// ctx ends first, the tenure abandoned in both cases: the name stays taken
// until the seized lease expires, as the old processes may still run.
func (e *Elector) settle(ctx context.Context, t *Tenure, w *holderWatch, log *slog.Logger) (proved bool, err error) {
	expiry := time.NewTimer(e.LeaseDuration)
	defer expiry.Stop()
	select {
	case <-w.done:
		if w.err == nil {
			return true, nil
		}
		log.Warn("cannot prove the old leader's command gone; ours starts when the old lease would have expired, a lease duration after our takeover",
			"leader", w.rec.Holder, "leader_token", w.rec.Token, "why", w.err)
		select {
		case <-expiry.C:
			return false, nil
		case <-t.Context().Done():
		case <-ctx.Done():
		}
	case <-expiry.C:
		log.Warn("the old leader on this host did not finish its stop within a lease duration (frozen?); starting ours as the lease's expiry would",
			"leader", w.rec.Holder, "leader_token", w.rec.Token)
		return false, nil
	case <-t.Context().Done():
	case <-ctx.Done():
	}
	t.Abandon()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	log.Warn("lost the seized lease before the old leader's command was gone; campaigning again", "why", context.Cause(t.Context()))
	return false, errSettleLost
}
