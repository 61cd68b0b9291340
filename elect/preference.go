package elect

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Preference: which replica should hold a name, not only which one may.
// A replica says of itself, in the store's candidate records
// (lease.Campaigner), its priority, whether it preempts, and whether it is
// ineligible for a while (its command was unhealthy here); the others weigh
// it:
//
//   - a replica granted a free name while a live candidate it does not
//     precede (lease.Precedes) campaigns hands the name to that candidate
//     at once, before starting anything (a step-down naming it, then the
//     release), and takes the name itself if that candidate has not taken
//     it within the reservation (deferWindow): no election waits on a dead
//     candidate;
//   - a replica with Candidacy.Preempt that has campaigned for
//     PreemptDelay and precedes the holder asks the holder to step down to
//     it, through the holder's ordered hand-over (its command stops, then
//     the release);
//   - an unhealthy leader's replica makes itself ineligible
//     (SetIneligible) and hands over to Successor, or keeps the name when
//     there is none.
//

// candidacy is what an Elector publishes of itself, and when it last did.
type candidacy struct {
	mu sync.Mutex
	// ineligibleUntil and note: set by SetIneligible, on the Elector's
	// clock.
	ineligibleUntil time.Duration
	note            string
	// published is when the candidacy was last written (the Elector's
	// clock), if ever (campaigned); since is when this Elector first
	// published it, from which PreemptDelay counts.
	published, since time.Duration
	campaigned       bool
	// refused is when this Elector's last Acquire was refused (which
	// keeps its candidacy live), if any was.
	refused time.Duration
	// deferred: the holders this Elector handed a fresh grant to, and
	// when, so that it defers to each at most once while that one's
	// candidacy lasts (2 × LeaseDuration).
	deferred map[string]time.Duration
	// preempted is the token of the tenure this Elector last asked to
	// step down for it, so that it asks each tenure once.
	preempted int64
}

// current is the candidacy at now: Candidacy with this replica's
// ineligibility, if any is left.
func (e *Elector) current(now time.Duration) lease.Candidacy {
	c := e.Candidacy
	e.cand.mu.Lock()
	defer e.cand.mu.Unlock()
	if left := e.cand.ineligibleUntil - now; left > 0 {
		c.Ineligible, c.Note = left, e.cand.note
	}
	return c
}

// publish writes this replica's candidacy to the store: the first time
// (introduce), then, when the candidacy says more than the zero
// Candidacy, once per LeaseDuration. A follower's refused Acquires keep
// its candidacy live with what it said (lease.SeeAgain), so only a holder,
// which makes none, calls it again, after each renewal, to keep its
// priority known to a replica that may preempt it; and a follower after a
// gap in its refusals (seenAgain). A failure is logged at debug level; the
// next call tries again.
func (e *Elector) publish(ctx context.Context) {
	now := e.clock()()
	c := e.current(now)
	e.cand.mu.Lock()
	due := !e.cand.campaigned ||
		(c != lease.Candidacy{} && now-e.cand.published >= e.LeaseDuration)
	e.cand.mu.Unlock()
	if !due {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
	defer cancel()
	if err := e.Store.Campaign(pctx, e.Name, e.Holder, c, e.LeaseDuration); err != nil {
		e.logger().Debug("cannot publish this replica's candidacy; trying again later", "err", err)
		return
	}
	e.cand.mu.Lock()
	if !e.cand.campaigned {
		e.cand.since, e.cand.campaigned = now, true
	}
	e.cand.published = now
	e.cand.mu.Unlock()
}

// seenAgain notes a refused Acquire, which keeps this replica's candidacy
// live with what it said. After a gap of more than LeaseDuration since the
// previous one (the store did not answer for a while), a store may have
// pruned the candidacy, and what it said with it: it is published again.
func (e *Elector) seenAgain(ctx context.Context) {
	now := e.clock()()
	e.cand.mu.Lock()
	gap := e.cand.refused != 0 && now-e.cand.refused > e.LeaseDuration
	e.cand.refused = now
	e.cand.mu.Unlock()
	if gap {
		e.publish(ctx)
	}
}

// introduce publishes this replica's candidacy the first time it is
// called, after the first Acquire: it replaces whatever an earlier run of
// this identity said (a refused Acquire keeps it). After the Acquire, not
// before, so that the first write naming this holder is the Acquire.
func (e *Elector) introduce(ctx context.Context) {
	e.cand.mu.Lock()
	done := e.cand.campaigned
	e.cand.mu.Unlock()
	if !done {
		e.publish(ctx)
	}
}

// SetIneligible makes this replica not preferred for d from now, with
// note (bounded to lease.MaxNote; the caller escapes it) saying why, and
// publishes that at once: followers then defer to an eligible candidate,
// and an eligible one with Preempt may take the name over.
func (e *Elector) SetIneligible(ctx context.Context, d time.Duration, note string) error {
	if len(note) > lease.MaxNote {
		note = note[:lease.MaxNote]
	}
	e.cand.mu.Lock()
	e.cand.ineligibleUntil, e.cand.note = e.clock()()+d, note
	e.cand.mu.Unlock()
	now := e.clock()()
	if err := e.Store.Campaign(ctx, e.Name, e.Holder, e.current(now), e.LeaseDuration); err != nil {
		return err
	}
	e.cand.mu.Lock()
	e.cand.published = now
	e.cand.mu.Unlock()
	return nil
}

// Ineligible reports how long this replica stays ineligible, and why;
// zero once eligible.
func (e *Elector) Ineligible() (time.Duration, string) {
	c := e.current(e.clock()())
	return c.Ineligible, c.Note
}

// Successor returns the live, eligible candidate other than this replica
// that is preferred (the highest priority; the first by identity among
// equals), or false when there is none.
func (e *Elector) Successor(ctx context.Context) (lease.Standing, bool, error) {
	list, err := e.Store.Candidates(ctx, e.Name)
	if err != nil {
		return lease.Standing{}, false, err
	}
	var best lease.Standing
	found := false
	for _, s := range lease.Others(list, e.Holder) {
		if s.Eligible() && (!found || s.Priority > best.Priority) {
			best, found = s, true
		}
	}
	return best, found, nil
}

// deferWindow is how long a replica that handed a fresh grant to a
// preferred candidate keeps the name reserved for it: twice the renew
// interval, after which the name is anyone's again.
func (e *Elector) deferWindow() time.Duration { return 2 * e.RetryPeriod }

// preference is preferred's answer: the candidate to hand a fresh grant
// to, if ok.
type preference struct {
	to lease.Standing
	ok bool
}

// preferred returns the live candidate other than this replica that
// precedes it and that it has not deferred to already while that one's
// candidacy lasts, if there is one.
func (e *Elector) preferred(ctx context.Context) preference {
	rctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
	list, err := e.Store.Candidates(rctx, e.Name)
	cancel()
	if err != nil {
		e.logger().Debug("cannot read the candidates; keeping the name", "err", err)
		return preference{}
	}
	now := e.clock()()
	mine := e.current(now)
	e.cand.mu.Lock()
	defer e.cand.mu.Unlock()
	var best lease.Standing
	found := false
	for _, s := range lease.Others(list, e.Holder) {
		if at, ok := e.cand.deferred[s.Holder]; ok && now-at < 2*e.LeaseDuration {
			continue
		}
		if lease.Precedes(s.Candidacy, mine) && (!found || lease.Precedes(s.Candidacy, best.Candidacy)) {
			best, found = s, true
		}
	}
	return preference{best, found}
}

// deferGrant hands ten, a tenure just granted on which nothing has started,
// to p, a live candidate that precedes this replica (preferred), if there
// is one: a step-down naming it, reserving the name for it for
// deferWindow, then the release. It reports whether it did; when the
// store refuses or fails, this replica keeps the name.
func (e *Elector) deferGrant(ctx context.Context, ten *Tenure, p preference, log *slog.Logger) bool {
	if !p.ok {
		return false
	}
	to := p.to
	window := e.deferWindow()
	rctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
	defer cancel()
	if _, err := e.Store.RequestStepDown(rctx, e.Name, to.Holder, window); err != nil {
		log.Info("a preferred candidate campaigns, but the name cannot be reserved for it; keeping it",
			"preferred", to.Holder, "err", err)
		return false
	}
	e.cand.mu.Lock()
	if e.cand.deferred == nil {
		e.cand.deferred = make(map[string]time.Duration)
	}
	e.cand.deferred[to.Holder] = e.clock()()
	e.cand.mu.Unlock()
	log.Info("granted the name, but a preferred candidate campaigns; handing it over before starting anything",
		"preferred", to.Holder, "preferred_priority", to.Priority, "priority", e.Candidacy.Priority,
		"ineligible", e.current(e.clock()()).Ineligible > 0, "reserved_for", window)
	if err := ten.Release(rctx); err != nil {
		log.Warn("cannot release the name for the preferred candidate; it takes the name when the lease expires", "err", err)
	}
	return true
}

// preemptIn is how long until this replica, a candidate with Preempt,
// may ask the holder rec to step down for it: zero when it may now; a
// negative value when it will not (no Preempt, a released record, or this
// tenure already asked).
func (e *Elector) preemptIn(rec lease.Record) time.Duration {
	if !e.Candidacy.Preempt || !rec.Held() || rec.Holder == e.Holder {
		return -1
	}
	e.cand.mu.Lock()
	defer e.cand.mu.Unlock()
	if !e.cand.campaigned || e.cand.preempted == rec.Token {
		return -1
	}
	return max(0, e.cand.since+e.PreemptDelay-e.clock()())
}

// preempt asks the holder of rec to step down for this replica when this
// one precedes it (the holder's candidacy as the store keeps it; none
// reads as the zero one) and has campaigned for PreemptDelay. It asks each
// tenure once.
func (e *Elector) preempt(ctx context.Context, rec lease.Record, log *slog.Logger) {
	if e.preemptIn(rec) != 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, e.RetryPeriod)
	defer cancel()
	list, err := e.Store.Candidates(rctx, e.Name)
	if err != nil {
		log.Debug("cannot read the candidates to weigh a preemption; trying again later", "err", err)
		return
	}
	var holder lease.Candidacy
	for _, s := range list {
		if s.Holder == rec.Holder {
			holder = s.Candidacy
		}
	}
	mine := e.current(e.clock()())
	e.cand.mu.Lock()
	e.cand.preempted = rec.Token
	e.cand.mu.Unlock()
	if !lease.Precedes(mine, holder) {
		return
	}
	if _, err := e.Store.RequestStepDown(rctx, e.Name, e.Holder, e.LeaseDuration); err != nil {
		log.Info("cannot ask the leader to hand over for preemption", "leader", rec.Holder, "err", err)
		return
	}
	log.Info("asked the leader to hand the name over: this replica preempts it", "leader", rec.Holder,
		"leader_priority", holder.Priority, "priority", mine.Priority, "preempt_delay", e.PreemptDelay)
}
