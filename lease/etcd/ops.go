package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// maxAttempts bounds how often an operation re-reads and retries after its
// transaction found that the keys changed since its read.
const maxAttempts = 50

// sweepLimit bounds the expired candidate keys an acquisition deletes.
const sweepLimit = 16

var errContended = errors.New("the keys kept changing under the transaction")

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	rec, err := s.acquire(ctx, name, holder, nil, ttl)
	return rec, s.wrap(fmt.Sprintf("acquire lease %q", name), err)
}

// Seize implements lease.Store.
func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	rec, err := s.acquire(ctx, name, holder, &dead, ttl)
	return rec, s.wrap(fmt.Sprintf("seize lease %q", name), err)
}

// acquire is Acquire, or Seize from dead when dead is not nil. It decides
// on the name's keys and writes the grant in one transaction whose
// conditions are that the record and lease key are still as decided on:
// the grant happens only if the name was free (its lease key absent:
// released, expired or never held; or, for Seize, naming dead's tenure) in
// the state the decision saw. When the keys changed in between, the
// transaction's other branch returns them, and it decides again.
//
// The first decision is on what this handle last learned of the name,
// when that says the name is free: typically the events of the Wait that a
// release woke, so that a hand-off costs one round trip (the transaction,
// with the spare lease kept alive alongside). Otherwise it reads first.
func (s *Store) acquire(ctx context.Context, name, holder string, dead *lease.Record, ttl time.Duration) (lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, err
	}
	if ttl <= 0 {
		return lease.Record{}, errTTL
	}
	k := s.keysOf(name)
	secs := ttlSeconds(ttl)
	// owned is a lease this call granted or kept alive, after it was
	// sent, for the grant, and that no tenure uses yet; left unused, it
	// becomes the store's spare.
	var owned *leaseRef
	defer func() {
		if owned != nil {
			if old := s.leases.putSpare(*owned); old != nil {
				s.revoke(old.id)
			}
		}
	}()
	st, _, known := s.seen.get(name)
	decided := known && free(st, holder, dead, time.Now())
	if known && !decided && st.held() {
		// The name was held when the handle last looked (a follower
		// whose Wait timed out): likely a refusal, which needs no lease
		// of its own. One transaction records the candidate and reads
		// the keys while the known tenure's lease is asked how long it
		// has left.
		var err error
		st, err = s.probe(ctx, k, st, holder, ttl)
		if err != nil {
			return lease.Record{}, err
		}
		now := time.Now()
		if !free(st, holder, dead, now) {
			return lease.Record{}, s.refusal(ctx, k, st, holder, dead, now)
		}
		decided = true
	}
	read := false // st was read by this call: its candidates are current
	for range maxAttempts {
		if !decided {
			// Get the lease while reading, so that a grant costs no
			// extra round trip; a refusal keeps it as the spare.
			leased := make(chan leaseResult, 1)
			if owned != nil {
				leased <- leaseResult{ref: *owned}
			} else {
				go func() { leased <- s.leaseFor(ctx, secs) }()
			}
			var err error
			st, _, err = s.readName(ctx, k, true)
			lr := <-leased
			if lr.err == nil {
				owned = &lr.ref
			}
			if err != nil {
				return lease.Record{}, err
			}
			read = true
			now := time.Now()
			if !free(st, holder, dead, now) {
				return lease.Record{}, s.refuse(ctx, k, st, holder, dead, ttl, now)
			}
			if lr.err != nil {
				return lease.Record{}, lr.err
			}
		}
		decided = false
		// The lease: the one this call holds; else the spare, kept alive
		// while the transaction runs (both are sent after the call was,
		// so the lease outlives the tenure's deadline); else a new one.
		var kept chan leaseResult
		if owned == nil {
			if spare, ok := s.leases.takeSpare(secs); ok {
				owned, kept = &spare, make(chan leaseResult, 1)
				go func() {
					until, err := s.keepSpare(ctx, spare.id, secs)
					kept <- leaseResult{ref: leaseRef{until: until}, err: err}
				}()
			} else {
				ref, err := s.grant(ctx, secs)
				if err != nil {
					return lease.Record{}, err
				}
				owned = &ref
			}
		}
		ref := *owned
		now := time.Now()
		rec := recordValue{Holder: holder, Token: lease.NextToken(st.rec.Token, now), AcquiredMs: now.UnixMilli()}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(k.record), "=", st.recRev),
			clientv3.Compare(clientv3.ModRevision(k.lease), "=", st.leaseRev()),
		}
		ops := []clientv3.Op{
			clientv3.OpPut(k.record, rec.encode()),
			clientv3.OpPut(k.lease, tenureValue(rec.Token, holder), clientv3.WithLease(ref.id)),
			clientv3.OpDelete(k.released),
		}
		if read { // known candidates may be stale: sweep another time
			stale, orphans := st.stale(now.UnixMilli(), sweepLimit)
			for _, c := range stale {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev))
				ops = append(ops, clientv3.OpDelete(c.key))
				if c.attrsKey != "" {
					cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(c.attrsKey), "=", c.attrsRev))
					ops = append(ops, clientv3.OpDelete(c.attrsKey))
				}
			}
			for _, kv := range orphans {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
				ops = append(ops, clientv3.OpDelete(string(kv.Key)))
			}
		}
		resp, err := s.client.Txn(ctx).If(cmps...).Then(ops...).Else(readOps(k, true)...).Commit()
		var kerr error
		if kept != nil {
			lr := <-kept
			kerr = lr.err
			owned.until = lr.ref.until
			if err == nil && resp.Succeeded && kerr != nil && !errors.Is(kerr, errLeaseGone) {
				// Granted, but the keep-alive sent alongside failed:
				// once more, so that the tenure's lease is known to
				// outlive its deadline.
				owned.until, kerr = s.keepSpare(ctx, ref.id, secs)
			}
		}
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			// The spare expired before the transaction: it wrote nothing.
			owned = nil
			decided = true
			continue
		case err != nil:
			// The outcome is unknown: the grant may hold the name, so the
			// lease is nobody's spare; it expires unrenewed.
			owned = nil
			return lease.Record{}, err
		case !resp.Succeeded:
			if kerr != nil {
				owned = nil
			}
			if st, err = s.learn(k, resp.Header.Revision, resp.Responses...); err != nil {
				return lease.Record{}, err
			}
			read = true
			now := time.Now()
			if !free(st, holder, dead, now) {
				return lease.Record{}, s.refuse(ctx, k, st, holder, dead, ttl, now)
			}
			decided = true
			continue
		case kerr != nil:
			// Granted, on a lease whose renewal is not confirmed (it
			// may even have expired since): the tenure's deadline
			// cannot be trusted. It ends with the lease.
			owned = nil
			return lease.Record{}, fmt.Errorf("keep the granted lease alive: %w", kerr)
		}
		owned = nil
		s.leases.setTenure(name, rec.Token, ref)
		st = nameState{found: true, rec: rec, recRev: resp.Header.Revision,
			leaseKV: &mvccpb.KeyValue{Key: []byte(k.lease), Value: []byte(tenureValue(rec.Token, holder)), Lease: int64(ref.id), ModRevision: resp.Header.Revision}}
		s.seen.read(name, st, resp.Header.Revision)
		return st.view(name, now, justRenewed(ref.ttl)), nil
	}
	return lease.Record{}, errContended
}

// free reports whether the state read lets holder take the name at now.
func free(st nameState, holder string, dead *lease.Record, now time.Time) bool {
	return lease.GrantWait(st.view("", now, justRenewed(1)), holder, dead) <= 0
}

// leaseResult is the lease a grant attaches to, or why there is none.
type leaseResult struct {
	ref leaseRef
	err error
}

// leaseFor returns the etcd lease a grant of name to holder attaches to,
// renewed or granted now, after the call started, so that it has at least
// secs seconds left: the store's spare lease, when etcd still has it; else
// a new one. A partition is never granted on its member's lease: a grant
// whose answer the member never got would live as long as the member
// renews. The member's next round, which claims the partition, moves it
// there (see round and adopt).
func (s *Store) leaseFor(ctx context.Context, secs int64) leaseResult {
	if spare, ok := s.leases.takeSpare(secs); ok {
		until, err := s.keepSpare(ctx, spare.id, secs)
		switch {
		case err == nil:
			spare.until = until
			return leaseResult{ref: spare}
		case !errors.Is(err, errLeaseGone):
			s.leases.putSpare(spare)
			return leaseResult{err: err}
		}
	}
	ref, err := s.grant(ctx, secs)
	return leaseResult{ref: ref, err: err}
}

// keepSpare renews the spare lease id, asked with secs seconds, once: it
// returns the lease's new until, or errLeaseGone when etcd no longer has
// it.
func (s *Store) keepSpare(ctx context.Context, id clientv3.LeaseID, secs int64) (time.Time, error) {
	sent := time.Now()
	ttl, err := s.keepAlive(ctx, id)
	switch {
	case err != nil:
		return time.Time{}, err
	case ttl < secs:
		return time.Time{}, errLeaseGone // not what it was asked for: treat it as gone
	}
	return sent.Add(time.Duration(ttl) * time.Second), nil
}

// refuse records holder as a candidate for name (lease.Seen, or
// lease.SeeAgain of its candidacy in st, which was read with the
// candidates), learns how long the current tenure has left, and returns
// the refusal. A candidacy still lease.Candidate.Fresh is left as it is:
// no write.
func (s *Store) refuse(ctx context.Context, k nameKeys, st nameState, holder string, dead *lease.Record, ttl time.Duration, now time.Time) error {
	if c := st.candidate(holder); c.key != "" && c.model().Fresh(ttl, now) {
		return s.refusal(ctx, k, st, holder, dead, now)
	}
	seen := seeAgain(st, holder, ttl, now)
	put := make(chan error, 1)
	go func() {
		_, err := s.client.Put(ctx, k.candidates+escape(holder), strconv.FormatInt(seen.SeenUntil.UnixMilli(), 10))
		put <- err
	}()
	err := s.refusal(ctx, k, st, holder, dead, now)
	if perr := <-put; perr != nil {
		return perr
	}
	return err
}

// probe records holder as a candidate for name (see seeAgain) and reads
// the name's keys, in one transaction; at the same time it asks etcd how
// long the lease of known, the tenure last seen, has left, and keeps the
// answer for refusal. The transaction leaves a candidacy that etcd holds
// as still lease.Candidate.Fresh as it is (see freshCmp): a follower
// woken by every change of hands then writes nothing while the new
// leader's command starts.
func (s *Store) probe(ctx context.Context, k nameKeys, known nameState, holder string, ttl time.Duration) (nameState, error) {
	id := clientv3.LeaseID(known.leaseKV.Lease)
	type asked struct {
		times map[clientv3.LeaseID]leaseTime
		err   error
	}
	answer := make(chan asked, 1)
	go func() {
		times, err := s.leaseTimes(ctx, []clientv3.LeaseID{id}, nil)
		answer <- asked{times, err}
	}()
	now := time.Now()
	key := k.candidates + escape(holder)
	seen := seeAgain(known, holder, ttl, now)
	read := clientv3.OpGet(k.base, clientv3.WithPrefix())
	put := clientv3.OpPut(key, strconv.FormatInt(seen.SeenUntil.UnixMilli(), 10))
	txn := s.client.Txn(ctx)
	if cmp, ok := freshCmp(key, ttl, now); ok {
		txn = txn.If(cmp).Then(read).Else(put, read)
	} else {
		txn = txn.Then(put, read)
	}
	resp, err := txn.Commit()
	a := <-answer
	if err != nil {
		return nameState{}, err
	}
	st, err := s.learn(k, resp.Header.Revision, resp.Responses[len(resp.Responses)-1])
	if err != nil {
		return nameState{}, err
	}
	if a.err == nil {
		st.times = a.times
	}
	return st, nil
}

// freshCmp is the condition that the candidate key key, written by a
// refusal with ttl, still holds a candidacy lease.Candidate.Fresh at now:
// its value, the end of the candidacy in Unix milliseconds, is past
// now + ttl. etcd compares values as bytes, which orders decimal numbers
// of the same length as numbers: ok is false when now + ttl has not
// thirteen digits, as every millisecond from 2001 to 2286 has. A missing
// key fails the comparison.
func freshCmp(key string, ttl time.Duration, now time.Time) (cmp clientv3.Cmp, ok bool) {
	bound := strconv.FormatInt(now.Add(ttl).UnixMilli(), 10)
	if len(bound) != 13 {
		return clientv3.Cmp{}, false
	}
	return clientv3.Compare(clientv3.Value(key), ">", bound), true
}

// seeAgain is the candidate a refusal of holder at now records: what st
// knows of its candidacy seen again (lease.SeeAgain), or a new one
// (lease.Seen). Only the candidate key is written: the attributes key
// stays as it is, and still belongs to the candidate key (attrsValid).
func seeAgain(st nameState, holder string, ttl time.Duration, now time.Time) lease.Candidate {
	if c := st.candidate(holder); c.key != "" {
		return lease.SeeAgain(c.model(), ttl, now)
	}
	return lease.Seen(holder, ttl, now)
}

// refusal learns how long the tenure in st has left (unless st.times
// knows) and returns the refusal of name to holder.
func (s *Store) refusal(ctx context.Context, k nameKeys, st nameState, holder string, dead *lease.Record, now time.Time) error {
	left := leaseTime{gone: true}
	if st.held() {
		id := clientv3.LeaseID(st.leaseKV.Lease)
		times, err := s.leaseTimes(ctx, []clientv3.LeaseID{id}, st.times)
		if err != nil {
			return err
		}
		left = times[id]
	}
	cur := st.view(k.name, now, left)
	if err := lease.Refusal(cur, holder, dead); err != nil {
		return err
	}
	// Free after all (a reservation ended in between): the caller retries.
	cur.Remaining = time.Millisecond
	return &lease.HeldError{Record: cur}
}

// Renew implements lease.Store: one LeaseKeepAlive of the tenure's etcd
// lease. What confirms that the name's lease key still stands for this
// tenure on that lease is a live watch of the name (see seen) or, without
// one, a linearizable read sent in parallel. See the package documentation
// for why the two need not be ordered.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	rec, err := s.renew(ctx, name, holder, token, ttl)
	if errors.Is(err, lease.ErrLost) {
		s.leases.forgetTenure(name, token)
	}
	return rec, s.wrap(fmt.Sprintf("renew lease %q", name), err)
}

func (s *Store) renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, err
	}
	if ttl <= 0 {
		return lease.Record{}, errTTL
	}
	k := s.keysOf(name)
	ref, known := s.leases.tenure(name, token)
	if !known {
		// Another handle acquired it: learn its lease first. Whether
		// other tenures share that lease is not known, so it is never
		// revoked from here.
		st, _, err := s.readName(ctx, k, false)
		if err != nil {
			return lease.Record{}, err
		}
		if !st.heldBy(holder, token) {
			return lease.Record{}, lease.ErrLost
		}
		ref = leaseRef{id: clientv3.LeaseID(st.leaseKV.Lease), shared: true}
	}
	if st, ok := s.seen.confirmed(name); ok && known && st.heldBy(holder, token) && st.leaseKV.Lease == int64(ref.id) {
		// A live watch of the name (the holder's own Wait for a
		// step-down request) vouches for the keys: the keep-alive alone
		// renews.
		got, err := s.keepAlive(ctx, ref.id)
		switch {
		case errors.Is(err, errLeaseGone):
			return lease.Record{}, lease.ErrLost
		case err != nil:
			return lease.Record{}, err
		}
		return s.renewed(ctx, k, st, token, ref, got, ttlSeconds(ttl))
	}
	type kept struct {
		ttl int64
		err error
	}
	keep := make(chan kept, 1)
	go func() {
		ttl, err := s.keepAlive(ctx, ref.id)
		keep <- kept{ttl, err}
	}()
	st, _, rerr := s.readName(ctx, k, false)
	ka := <-keep
	if rerr == nil && st.heldBy(holder, token) && st.leaseKV.Lease != int64(ref.id) {
		// A renewal round attached the partition to its member's lease
		// since: renew that one.
		ref = leaseRef{id: clientv3.LeaseID(st.leaseKV.Lease), shared: true}
		ka.ttl, ka.err = s.keepAlive(ctx, ref.id)
		s.leases.setTenure(name, token, ref)
	}
	switch {
	case errors.Is(ka.err, errLeaseGone):
		return lease.Record{}, lease.ErrLost
	case ka.err != nil:
		return lease.Record{}, ka.err
	case rerr != nil:
		return lease.Record{}, rerr
	case !st.heldBy(holder, token):
		return lease.Record{}, lease.ErrLost
	}
	return s.renewed(ctx, k, st, token, ref, ka.ttl, ttlSeconds(ttl))
}

// renewed is the record of the tenure token in st, whose lease ref etcd just
// renewed to got seconds. etcd renews a lease to the TTL it was granted
// with; a renewal that asks for more (want) moves the tenure to a longer
// lease. (One that asks for less keeps the longer lease: never shorter.)
func (s *Store) renewed(ctx context.Context, k nameKeys, st nameState, token int64, ref leaseRef, got, want int64) (lease.Record, error) {
	now := time.Now()
	left := justRenewed(got)
	if got < want {
		moved, err := s.move(ctx, k, st, ref, want)
		if err != nil {
			return lease.Record{}, err
		}
		s.leases.setTenure(k.name, token, moved)
		left = justRenewed(moved.ttl)
	}
	return st.view(k.name, now, left), nil
}

// move attaches a tenure's lease key to a new etcd lease of secs seconds.
func (s *Store) move(ctx context.Context, k nameKeys, st nameState, old leaseRef, secs int64) (leaseRef, error) {
	ref, err := s.grant(ctx, secs)
	if err != nil {
		return leaseRef{}, err
	}
	value := string(st.leaseKV.Value)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k.lease), "=", value),
			clientv3.Compare(clientv3.LeaseValue(k.lease), "=", old.id)).
		Then(clientv3.OpPut(k.lease, value, clientv3.WithLease(ref.id))).
		Commit()
	switch {
	case err != nil:
		return leaseRef{}, err
	case !resp.Succeeded:
		s.revoke(ref.id)
		return leaseRef{}, lease.ErrLost
	}
	if !old.shared {
		s.revoke(old.id)
	}
	return ref, nil
}

// Annotate implements lease.Store.
func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	err := s.update(ctx, name, func(st nameState, now time.Time) (recordValue, []clientv3.Cmp, error) {
		if !st.heldBy(holder, token) {
			return recordValue{}, nil, lease.ErrLost // the lease key stands for another tenure
		}
		annotated, err := lease.Annotate(st.view(name, now, justRenewed(1)), holder, token, where)
		if err != nil {
			return recordValue{}, nil, err
		}
		rec := st.rec
		rec.Where = annotated.Where
		return rec, nil, nil
	})
	return s.wrap(fmt.Sprintf("annotate lease %q", name), err)
}

// RequestStepDown implements lease.Store.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	var out lease.Record
	err := s.update(ctx, name, func(st nameState, now time.Time) (recordValue, []clientv3.Cmp, error) {
		var (
			cmps []clientv3.Cmp
			rerr error
		)
		asked, err := lease.StepDown(st.view(name, now, justRenewed(1)), successor, window, func() bool {
			// The successor's candidacy or membership must still be the
			// one read.
			cmp, live, err := s.liveSuccessor(ctx, st, name, successor, now)
			if live {
				cmps = append(cmps, cmp)
			}
			rerr = err
			return live
		})
		switch {
		case rerr != nil:
			return recordValue{}, nil, rerr
		case err != nil:
			return recordValue{}, nil, err
		}
		rec := st.rec
		rec.StepDown, rec.Successor, rec.Excluded = asked.StepDown, asked.Successor, asked.Excluded
		rec.ReservedUntilMs = now.Add(asked.Reserved).UnixMilli()
		st.rec = rec
		out = st.view(name, now, leaseTime{gone: true})
		return rec, cmps, nil
	})
	if err != nil {
		return lease.Record{}, s.wrap(fmt.Sprintf("request step-down of lease %q", name), err)
	}
	// Remaining as Get would report it.
	if cur, err := s.Get(ctx, name); err == nil && cur.Token == out.Token {
		out.Remaining, out.Expires, out.Renewed = cur.Remaining, cur.Expires, cur.Renewed
	}
	return out, nil
}

// liveSuccessor reports whether successor is a live candidate for name in
// st at now or, when name is a partition, a live member of its group, and
// returns the comparison that holds while that candidate or member key is
// as read. It reads the member key only when successor is no candidate.
func (s *Store) liveSuccessor(ctx context.Context, st nameState, name, successor string, now time.Time) (clientv3.Cmp, bool, error) {
	cand := st.candidate(successor)
	if lease.LiveSuccessor(name, cand.model(), time.Time{}, now) {
		return clientv3.Compare(clientv3.ModRevision(cand.key), "=", cand.rev), true, nil
	}
	group, _, ok := lease.SplitPartitionKey(name)
	if !ok {
		return clientv3.Cmp{}, false, nil
	}
	key := s.memberKey(group, successor)
	resp, err := s.client.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return clientv3.Cmp{}, false, err
	}
	var m memberValue
	if json.Unmarshal(resp.Kvs[0].Value, &m) != nil || !lease.LiveSuccessor(name, lease.Candidate{}, time.UnixMilli(m.UntilMs), now) {
		return clientv3.Cmp{}, false, nil
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision), true, nil
}

// update rewrites name's record with what change makes of the state read,
// in a transaction conditional on the record and lease key being as read
// (and on extra conditions change adds); it reads again when they changed.
// change's error ends the update.
func (s *Store) update(ctx context.Context, name string, change func(nameState, time.Time) (recordValue, []clientv3.Cmp, error)) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	k := s.keysOf(name)
	for range maxAttempts {
		st, _, err := s.readName(ctx, k, true)
		if err != nil {
			return err
		}
		rec, cmps, err := change(st, time.Now())
		if err != nil {
			return err
		}
		cmps = append(cmps,
			clientv3.Compare(clientv3.ModRevision(k.record), "=", st.recRev),
			clientv3.Compare(clientv3.ModRevision(k.lease), "=", st.leaseRev()))
		resp, err := s.client.Txn(ctx).If(cmps...).Then(clientv3.OpPut(k.record, rec.encode())).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
	}
	return errContended
}

// Release implements lease.Store: one transaction deletes the lease key and
// writes the released key, if the lease key still stands for this tenure;
// the tenure's own etcd lease (a member's shared one is not) is then
// revoked in the background, as nothing depends on it any more.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return s.wrap(fmt.Sprintf("release lease %q", name), err)
	}
	k := s.keysOf(name)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k.lease), "=", tenureValue(token, holder))).
		Then(clientv3.OpDelete(k.lease), clientv3.OpPut(k.released, strconv.FormatInt(token, 10))).
		Commit()
	switch {
	case err != nil:
		return s.wrap(fmt.Sprintf("release lease %q", name), err)
	case !resp.Succeeded:
		s.leases.forgetTenure(name, token)
		return lease.ErrLost
	}
	s.seen.forget(name)
	if ref, ok := s.leases.tenure(name, token); ok {
		s.leases.forgetTenure(name, token)
		if !ref.shared {
			// Clean-up only (no key is attached to it any more): off
			// the hand-off's path; Close waits for it.
			s.revokeLater(ref.id)
		}
	}
	return nil
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	rec, err := s.get(ctx, name)
	return rec, s.wrap(fmt.Sprintf("get lease %q", name), err)
}

func (s *Store) get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, err
	}
	k := s.keysOf(name)
	st, _, err := s.readName(ctx, k, false)
	if err != nil {
		return lease.Record{}, err
	}
	if !st.found {
		return lease.Record{}, lease.ErrNotFound
	}
	left := leaseTime{gone: true}
	if st.held() {
		id := clientv3.LeaseID(st.leaseKV.Lease)
		times, err := s.leaseTimes(ctx, []clientv3.LeaseID{id}, nil)
		if err != nil {
			return lease.Record{}, err
		}
		left = times[id]
	}
	return st.view(name, time.Now(), left), nil
}

// List implements lease.Store: one read of every name's and group's keys,
// then one LeaseTimeToLive per distinct etcd lease of a held name.
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	recs, err := s.list(ctx)
	return recs, s.wrap("list leases", err)
}

func (s *Store) list(ctx context.Context) ([]lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(s.prefix+"/n/", clientv3.WithPrefix()),
		clientv3.OpGet(s.prefix+"/g/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, err
	}
	states := map[string]*nameState{}
	keys := map[string]nameKeys{}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			name, ok := s.nameOfKey(string(kv.Key))
			if !ok {
				continue
			}
			if states[name] == nil {
				states[name], keys[name] = &nameState{}, s.keysOf(name)
			}
			if err := states[name].add(keys[name], kv); err != nil {
				return nil, err
			}
		}
	}
	var ids []clientv3.LeaseID
	for _, st := range states {
		st.finish()
		if st.held() {
			ids = append(ids, clientv3.LeaseID(st.leaseKV.Lease))
		}
	}
	times, err := s.leaseTimes(ctx, ids, nil)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var recs []lease.Record
	for name, st := range states {
		if !st.found {
			continue
		}
		left := leaseTime{gone: true}
		if st.held() {
			left = times[clientv3.LeaseID(st.leaseKV.Lease)]
		}
		recs = append(recs, st.view(name, now, left))
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

// nameOfKey returns the lease name whose record, lease or released key key
// is (P/n/NAME/… or P/g/GROUP/p/N/…).
func (s *Store) nameOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[0] == "n":
		name, err := unescape(parts[1])
		return name, err == nil
	case len(parts) == 5 && parts[0] == "g" && parts[2] == "p":
		group, err := unescape(parts[1])
		p, perr := strconv.Atoi(parts[3])
		if err != nil || perr != nil || p < 0 {
			return "", false
		}
		return lease.PartitionKey(group, p), true
	}
	return "", false
}
