package kubernetes

import (
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The operations on one record, as pure functions of the record read and
// the server time's bounds lo and hi. Each returns the record to write, or
// nil to write nothing, and the operation's result. The caller writes the
// record with the resourceVersion it read, so that the decision and the
// write are one atomic operation, and decides again on a conflict.

// errForeignStepDown refuses a step-down of a tenure leaderrun did not
// grant: its holder would never read the request.
var errForeignStepDown = errors.New("the Lease is held by a program that is not leaderrun (a client-go elector?), which cannot be asked to step down")

// grant is Acquire, or Seize of dead when dead is not nil, of a record cur
// (nil: absent).
func grant(cur *rec, name, holder string, dead *lease.Record, ttl time.Duration, lo, hi time.Time) (*rec, error) {
	var view lease.Record
	var prev int64
	if cur != nil {
		view, prev = cur.view(name, lo), cur.prev
		if cur.foreign {
			dead = nil // only leaderrun's tenures are proved dead
		}
	}
	granted, refusal := lease.Grant(view, name, holder, dead, ttl, hi)
	if refusal != nil {
		// A foreign holder's Lease is not written to: its holder could
		// not hand it over anyway.
		if !cur.foreign && cur.see(cur.seeAgain(holder, ttl, hi), ttl, hi) {
			return cur, refusal
		}
		return nil, refusal
	}
	next := &rec{
		Holder: holder, Token: max(granted.Token, prev+1), AcquiredUS: us(hi), RenewedUS: us(hi), TTLMS: ttl.Milliseconds(),
	}
	if cur != nil {
		next.Candidates, next.attrs = cur.liveCandidates(lo), cur.attrs
	}
	return next, nil
}

// campaign is Campaign of holder on cur (nil: absent, when the record
// written holds the candidate alone). A Lease a client-go elector holds
// is not written to, as by a refusal: its holder would not weigh what
// holder says.
func campaign(cur *rec, holder string, c lease.Candidacy, ttl time.Duration, hi time.Time) *rec {
	if cur != nil && cur.foreign && !cur.Released {
		return nil
	}
	next := &rec{}
	if cur != nil {
		n := *cur
		next = &n
	}
	next.setCandidate(lease.Campaign(holder, c, ttl, hi))
	return next
}

// withdraw is Withdraw of holder from cur: nil when it is no candidate.
func withdraw(cur *rec, holder string) *rec {
	if cur == nil {
		return nil
	}
	_, cand := cur.Candidates[holder]
	_, said := cur.attrs[holder]
	if !cand && !said {
		return nil
	}
	next := *cur
	next.Candidates, next.attrs = cloneMap(cur.Candidates), cloneMap(cur.attrs)
	delete(next.Candidates, holder)
	delete(next.attrs, holder)
	return &next
}

// renew is Renew of cur.
func renew(cur *rec, holder string, token int64, ttl time.Duration, hi time.Time) (*rec, error) {
	if _, err := lease.Renew(cur.held(hi), holder, token, ttl, hi); err != nil {
		return nil, err
	}
	next := *cur
	next.RenewedUS, next.TTLMS = us(hi), ttl.Milliseconds()
	return &next, nil
}

// annotate is Annotate of cur.
func annotate(cur *rec, holder string, token int64, where string, hi time.Time) (*rec, error) {
	annotated, err := lease.Annotate(cur.held(hi), holder, token, where)
	if err != nil {
		return nil, err
	}
	next := *cur
	next.Where = annotated.Where
	return &next, nil
}

// release is Release of cur.
func release(cur *rec, holder string, token int64, hi time.Time) (*rec, error) {
	released, err := lease.Release(cur.held(hi), holder, token)
	if err != nil {
		return nil, err
	}
	next := *cur
	next.Released = released.Released
	return &next, nil
}

// stepDown is RequestStepDown of cur (nil: absent); memberUntil is when
// successor's membership of the partition's group ends (zero: none).
func stepDown(cur *rec, name, successor string, memberUntil time.Time, window time.Duration, lo, hi time.Time) (*rec, lease.Record, error) {
	var view lease.Record
	if cur != nil {
		view = cur.view(name, lo)
	}
	asked, err := lease.StepDown(view, successor, window, func() bool {
		return lease.LiveSuccessor(name, cur.candidate(successor), memberUntil, lo)
	})
	if err != nil {
		return nil, lease.Record{}, err
	}
	if cur.foreign {
		return nil, lease.Record{}, lease.Refused(fmt.Errorf("step-down of %q: held by %s: %w", name, view.Holder, errForeignStepDown))
	}
	next := *cur
	next.StepDown, next.Successor, next.Excluded = asked.StepDown, asked.Successor, asked.Excluded
	// From the earliest the server's clock may read: the reservation
	// lasts at most the window, as the contract says, however uncertain
	// the clock (from the latest, it would last up to the uncertainty
	// longer).
	next.ReservedUS = us(lo.Add(asked.Reserved))
	return &next, next.view(name, lo), nil
}

// join is Join of cur (nil: a group never written).
func join(cur *groupState, group string, partitions int, member string, ttl time.Duration, hi time.Time) (*groupState, error) {
	var next groupState
	if cur != nil {
		next = *cur
	}
	n, err := lease.JoinPartitions(group, next.Partitions, partitions)
	if err != nil {
		return nil, err
	}
	next.Partitions = n
	next.keep(member, ttl, hi)
	return &next, nil
}

// renewMember is RenewMember of cur.
func renewMember(cur *groupState, member string, claims []lease.Claim, ttl time.Duration, hi time.Time) (*groupState, error) {
	if cur == nil || cur.Partitions == 0 {
		return nil, lease.ErrNotFound
	}
	next := *cur
	next.keep(member, ttl, hi)
	next.Leases = cloneMap(cur.Leases)
	for _, c := range claims {
		if renewed, err := renew(next.Leases[c.Partition], member, c.Token, ttl, hi); err == nil {
			next.Leases[c.Partition] = renewed
		}
	}
	return &next, nil
}

// keep makes member a member until hi + ttl, in a copy of g's members.
func (g *groupState) keep(member string, ttl time.Duration, hi time.Time) {
	until, _ := lease.KeepMember(fromUS(g.Members[member]), ttl, hi)
	g.Members = cloneMap(g.Members)
	if g.Members == nil {
		g.Members = map[string]int64{}
	}
	g.Members[member] = us(until)
}

// leave is Leave of cur.
func leave(cur *groupState, member string) *groupState {
	if cur == nil {
		return nil
	}
	if _, ok := cur.Members[member]; !ok {
		return nil
	}
	next := *cur
	next.Members = cloneMap(cur.Members)
	delete(next.Members, member)
	return &next
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
