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
	token := hi.UnixMilli()
	var candidates map[string]int64
	if cur != nil {
		view := cur.view(name, lo)
		blocks := view.Blocks(holder)
		if dead != nil && !cur.foreign && !view.Released && view.Holder == dead.Holder && view.Token == dead.Token {
			// The tenure is proved dead: only a reservation keeps holder out.
			blocks = lease.Record{Reserved: view.Reserved, Successor: view.Successor, Excluded: view.Excluded}.Blocks(holder)
		}
		if blocks > 0 {
			view.Remaining = blocks
			refusal := &lease.HeldError{Record: view}
			// A foreign holder's Lease is not written to: its holder
			// could not hand it over anyway.
			if !cur.foreign && cur.see(holder, hi.Add(2*ttl), ttl) {
				return cur, refusal
			}
			return nil, refusal
		}
		token = max(token, cur.Token+1, cur.prev+1)
		candidates = cur.liveCandidates(lo, holder)
	}
	return &rec{
		Holder: holder, Token: token, AcquiredUS: us(hi), RenewedUS: us(hi), TTLMS: ttl.Milliseconds(),
		Candidates: candidates,
	}, nil
}

// renew is Renew of cur.
func renew(cur *rec, holder string, token int64, ttl time.Duration, hi time.Time) (*rec, error) {
	if !cur.heldBy(holder, token, hi) {
		return nil, lease.ErrLost
	}
	next := *cur
	next.RenewedUS, next.TTLMS = us(hi), ttl.Milliseconds()
	return &next, nil
}

// annotate is Annotate of cur.
func annotate(cur *rec, holder string, token int64, where string, hi time.Time) (*rec, error) {
	if !cur.heldBy(holder, token, hi) {
		return nil, lease.ErrLost
	}
	next := *cur
	next.Where = where
	return &next, nil
}

// release is Release of cur.
func release(cur *rec, holder string, token int64, hi time.Time) (*rec, error) {
	if !cur.heldBy(holder, token, hi) {
		return nil, lease.ErrLost
	}
	next := *cur
	next.Released = true
	return &next, nil
}

// stepDown is RequestStepDown of cur (nil: absent); member reports
// whether successor is a live member of the partition's group.
func stepDown(cur *rec, name, successor string, member bool, window time.Duration, lo, hi time.Time) (*rec, lease.Record, error) {
	if cur == nil {
		return nil, lease.Record{}, lease.StepDownRefusal(lease.Record{}, false, successor)
	}
	view := cur.view(name, lo)
	live := member || cur.Candidates[successor] > us(lo)
	if !view.Held() || successor == view.Holder || (successor != "" && !live) {
		return nil, lease.Record{}, lease.StepDownRefusal(view, true, successor)
	}
	if cur.foreign {
		return nil, lease.Record{}, lease.Refused(fmt.Errorf("step-down of %q: held by %s: %w", name, view.Holder, errForeignStepDown))
	}
	next := *cur
	next.StepDown = true
	next.Successor, next.Excluded = successor, ""
	if successor == "" {
		next.Excluded = next.Holder
	}
	// From the earliest the server's clock may read: the reservation
	// lasts at most the window, as the contract says, however uncertain
	// the clock (from the latest, it would last up to the uncertainty
	// longer).
	next.ReservedUS = us(lo.Add(window))
	return &next, next.view(name, lo), nil
}

// join is Join of cur (nil: a group never written).
func join(cur *groupState, group string, partitions int, member string, ttl time.Duration, hi time.Time) (*groupState, error) {
	next := groupState{Partitions: partitions}
	if cur != nil {
		next = *cur
		next.Members = cloneMap(cur.Members)
		if next.Partitions == 0 {
			next.Partitions = partitions
		}
	}
	if next.Partitions != partitions {
		return nil, &lease.PartitionsError{Group: group, Have: next.Partitions, Want: partitions}
	}
	if next.Members == nil {
		next.Members = map[string]int64{}
	}
	next.Members[member] = us(hi.Add(ttl))
	return &next, nil
}

// renewMember is RenewMember of cur.
func renewMember(cur *groupState, member string, claims []lease.Claim, ttl time.Duration, hi time.Time) (*groupState, error) {
	if cur == nil || cur.Partitions == 0 {
		return nil, lease.ErrNotFound
	}
	next := *cur
	next.Members = cloneMap(cur.Members)
	if next.Members == nil {
		next.Members = map[string]int64{}
	}
	next.Members[member] = us(hi.Add(ttl))
	next.Leases = cloneMap(cur.Leases)
	for _, c := range claims {
		if r := next.Leases[c.Partition]; r.heldBy(member, c.Token, hi) {
			renewed := *r
			renewed.RenewedUS, renewed.TTLMS = us(hi), ttl.Milliseconds()
			next.Leases[c.Partition] = &renewed
		}
	}
	return &next, nil
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
