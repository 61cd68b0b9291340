package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// A group's keys live under P/g/GROUP/: its number of partitions in n, a
// member record per member in m/MEMBER, attached to the member's etcd
// lease, and each partition's keys in p/N/. A member's partitions, once
// acquired or renewed in a round, are attached to the member's lease too,
// so one LeaseKeepAlive renews the member and all of its partitions; they
// expire together when the member stops renewing, which is what the
// owner's step-out expects.

// claimsPerTxn bounds the partitions one round's transaction re-attaches,
// below etcd's default limit of 128 operations per transaction.
const claimsPerTxn = 100

// groupState is what a read of a group's keys found.
type groupState struct {
	found      bool
	partitions int
	members    map[string]memberKV
	parts      map[int]*nameState
}

type memberKV struct {
	value memberValue
	lease clientv3.LeaseID
}

func (s *Store) parseGroup(group string, kvs []*mvccpb.KeyValue) (groupState, error) {
	base := s.groupBase(group)
	gs := groupState{members: map[string]memberKV{}, parts: map[int]*nameState{}}
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), base)
		switch {
		case rest == "n":
			n, err := strconv.Atoi(string(kv.Value))
			if err != nil {
				return gs, fmt.Errorf("key %s: %w", kv.Key, err)
			}
			gs.found, gs.partitions = true, n
		case strings.HasPrefix(rest, "m/"):
			id, err := unescape(strings.TrimPrefix(rest, "m/"))
			var v memberValue
			if err != nil || json.Unmarshal(kv.Value, &v) != nil {
				continue // not one of ours
			}
			gs.members[id] = memberKV{value: v, lease: clientv3.LeaseID(kv.Lease)}
		case strings.HasPrefix(rest, "p/"):
			num, _, _ := strings.Cut(strings.TrimPrefix(rest, "p/"), "/")
			p, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			if gs.parts[p] == nil {
				gs.parts[p] = &nameState{}
			}
			if err := gs.parts[p].add(s.keysOf(lease.PartitionKey(group, p)), kv); err != nil {
				return gs, err
			}
		}
	}
	for _, st := range gs.parts {
		st.finish()
	}
	return gs, nil
}

// view builds the group as of now. A member is live while its record
// exists (its etcd lease has not been revoked) and the time its last round
// wrote, on that replica's wall clock, has not passed. A held partition's
// time left comes from known, else from the member whose lease it shares,
// else from LeaseTimeToLive.
func (s *Store) groupView(ctx context.Context, group string, gs groupState, known map[clientv3.LeaseID]leaseTime) (lease.Group, error) {
	now := time.Now()
	g := lease.Group{Name: group, Partitions: gs.partitions, Leases: make([]lease.Record, gs.partitions)}
	if known == nil {
		known = map[clientv3.LeaseID]leaseTime{}
	}
	until := make(map[string]time.Time, len(gs.members))
	for id, m := range gs.members {
		until[id] = time.UnixMilli(m.value.UntilMs)
	}
	g.Members = lease.LiveMembers(until, now)
	for _, live := range g.Members {
		m, left := gs.members[live.Identity], live.Remaining
		if _, ok := known[m.lease]; !ok {
			// The member's round renewed its lease when it wrote until.
			ttl := time.Duration(ttlSeconds(time.Duration(m.value.TTLMs)*time.Millisecond)) * time.Second
			known[m.lease] = leaseTime{left: left + ttl - time.Duration(m.value.TTLMs)*time.Millisecond, granted: ttl}
		}
	}
	var ids []clientv3.LeaseID
	for p, st := range gs.parts {
		if p < gs.partitions && st.held() {
			ids = append(ids, clientv3.LeaseID(st.leaseKV.Lease))
		}
	}
	times, err := s.leaseTimes(ctx, ids, known)
	if err != nil {
		return lease.Group{}, err
	}
	for p := range g.Leases {
		name := lease.PartitionKey(group, p)
		st := gs.parts[p]
		if st == nil || !st.found {
			g.Leases[p] = lease.Record{Name: name}
			continue
		}
		left := leaseTime{gone: true}
		if st.held() {
			left = times[clientv3.LeaseID(st.leaseKV.Lease)]
		}
		g.Leases[p] = st.view(name, now, left)
	}
	return g, nil
}

// memberLease returns member's etcd lease for a round of ttl seconds,
// renewed or granted now: the handle's lease for the member when it has
// one of that TTL that etcd still has, else a new one.
func (s *Store) memberLease(ctx context.Context, group, member string, secs int64) (leaseRef, leaseTime, error) {
	if m, ok := s.leases.member(group, member); ok && m.asked == secs {
		kept, err := s.keepMember(ctx, group, member, m)
		switch {
		case err == nil:
			return kept, justRenewed(kept.ttl), nil
		case !errors.Is(err, errLeaseGone):
			return leaseRef{}, leaseTime{}, err
		}
		s.leases.forgetMember(group, member, m.id)
	}
	ref, err := s.grantMember(ctx, group, member, secs)
	if err != nil {
		return leaseRef{}, leaseTime{}, err
	}
	return ref, justRenewed(ref.ttl), nil
}

// grantMember grants member a new etcd lease of secs seconds and makes it
// the handle's lease for the member.
func (s *Store) grantMember(ctx context.Context, group, member string, secs int64) (leaseRef, error) {
	ref, err := s.grant(ctx, secs)
	if err != nil {
		return leaseRef{}, err
	}
	ref.shared = true
	s.leases.setMember(group, member, ref)
	return ref, nil
}

// Join implements lease.Store: the member's lease is renewed (or granted),
// then one transaction records N unless recorded, writes the member record
// if N matches, and reads the group.
func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	g, err := s.join(ctx, group, partitions, member, ttl)
	return g, s.wrap(fmt.Sprintf("join group %q", group), err)
}

func (s *Store) join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, err
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	if ttl <= 0 {
		return lease.Group{}, errTTL
	}
	base := s.groupBase(group)
	nKey, mKey := base+"n", s.memberKey(group, member)
	n := strconv.Itoa(partitions)
	for range 2 {
		ref, left, err := s.memberLease(ctx, group, member, ttlSeconds(ttl))
		if err != nil {
			return lease.Group{}, err
		}
		put := clientv3.OpPut(mKey, memberValue{UntilMs: time.Now().Add(ttl).UnixMilli(), TTLMs: ttl.Milliseconds()}.encode(),
			clientv3.WithLease(ref.id))
		get := clientv3.OpGet(base, clientv3.WithPrefix())
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(nKey), "=", 0)).
			Then(clientv3.OpPut(nKey, n), put, get).
			Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(nKey), "=", n)}, []clientv3.Op{put}, nil), get).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.leases.forgetMember(group, member, ref.id) // expired since: once more
			continue
		}
		if err != nil {
			return lease.Group{}, err
		}
		gs, err := s.parseGroup(group, resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs)
		if err != nil {
			return lease.Group{}, err
		}
		if _, err := lease.JoinPartitions(group, gs.partitions, partitions); err != nil {
			return lease.Group{}, err
		}
		return s.groupView(ctx, group, gs, map[clientv3.LeaseID]leaseTime{ref.id: left})
	}
	return lease.Group{}, errLeaseGone
}

// RenewMember implements lease.Store. A round is one LeaseKeepAlive of the
// member's etcd lease, which renews the member and every partition already
// attached to it, and in parallel one transaction that rewrites the member
// record (recreating it if it had expired or left), attaches each claimed
// partition still held with the claim's token to the member's lease if it
// is on another, and reads the group. Both are one round trip; a round
// costs one more LeaseTimeToLive per partition that is on a lease of no
// live member. After the member's lease expired, the round grants a new
// one and writes again: the partitions on the old lease are lost, not
// revived. When the handle last renewed the member's lease more than half
// its TTL ago, the keep-alive goes first and the transaction follows: a
// lease that may have expired must not take claims, which etcd attaches
// to an expired lease until it revokes it, and then deletes.
func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	g, err := s.renewMember(ctx, group, member, claims, ttl)
	return g, s.wrap(fmt.Sprintf("renew member %q of group %q", member, group), err)
}

func (s *Store) renewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	if ttl <= 0 {
		return lease.Group{}, errTTL
	}
	secs := ttlSeconds(ttl)
	var lost clientv3.LeaseID // a member lease that expired: its partitions stay lost
	ref, cached := s.leases.member(group, member)
	confirmed := false // ref was kept alive by this call
	if cached && ref.asked == secs && time.Until(ref.until) < time.Duration(ref.ttl)*time.Second/2 {
		kept, err := s.keepMember(ctx, group, member, ref)
		switch {
		case errors.Is(err, errLeaseGone):
			s.leases.forgetMember(group, member, ref.id)
			lost, cached = ref.id, false
		case err != nil:
			return lease.Group{}, err
		default:
			ref, confirmed = kept, true
		}
	}
	if !cached || ref.asked != secs {
		var err error
		if ref, err = s.grantMember(ctx, group, member, secs); err != nil {
			return lease.Group{}, err
		}
		cached = false
	}
	for range 2 {
		type kept struct {
			ttl int64
			err error
		}
		keep := make(chan kept, 1)
		if cached && !confirmed {
			go func() {
				got, err := s.keepMember(ctx, group, member, ref)
				keep <- kept{got.ttl, err}
			}()
		} else {
			keep <- kept{ttl: ref.ttl}
		}
		kvs, err := s.round(ctx, group, member, claims, ttl, ref.id, lost)
		ka := <-keep
		if errors.Is(ka.err, errLeaseGone) || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.leases.forgetMember(group, member, ref.id)
			lost = ref.id
			if ref, err = s.grantMember(ctx, group, member, secs); err != nil {
				return lease.Group{}, err
			}
			cached = false
			continue
		}
		switch {
		case err != nil:
			return lease.Group{}, err
		case ka.err != nil:
			return lease.Group{}, ka.err
		}
		gs, err := s.parseGroup(group, kvs)
		if err != nil {
			return lease.Group{}, err
		}
		s.adopt(group, member, claims, gs, ref)
		s.releaseUnclaimed(ctx, group, member, claims, gs, ref)
		return s.groupView(ctx, group, gs, map[clientv3.LeaseID]leaseTime{ref.id: justRenewed(ka.ttl)})
	}
	return lease.Group{}, errLeaseGone
}

// keepMember renews member's lease ref once and records, for the handle,
// until when it lasts at the earliest.
func (s *Store) keepMember(ctx context.Context, group, member string, ref leaseRef) (leaseRef, error) {
	sent := time.Now()
	got, err := s.keepAlive(ctx, ref.id)
	if err != nil {
		return leaseRef{}, err
	}
	ref.ttl, ref.until = got, sent.Add(time.Duration(got)*time.Second)
	s.leases.setMember(group, member, ref)
	return ref, nil
}

// adopt records that the claimed partitions the round found on the
// member's lease ref are renewed with it from now on, and revokes the
// leases of their own they were granted with, which no key uses any more.
func (s *Store) adopt(group, member string, claims []lease.Claim, gs groupState, ref leaseRef) {
	for _, c := range claims {
		st := gs.parts[c.Partition]
		if st == nil || !st.heldBy(member, c.Token) || st.leaseKV.Lease != int64(ref.id) {
			continue
		}
		name := lease.PartitionKey(group, c.Partition)
		if old, ok := s.leases.tenure(name, c.Token); ok && !old.shared && old.id != ref.id {
			s.revoke(old.id)
		}
		s.leases.setTenure(name, c.Token, ref)
	}
}

// releaseUnclaimed releases the partitions of member on its lease ref that
// this round did not claim: their tenures are over for the member (ended
// at their renew deadline, or handed off) but their release failed, and
// the member's lease, which its rounds keep alive, would otherwise hold
// them until the member leaves. The group view the round returns still
// shows them held; the next read shows them free.
func (s *Store) releaseUnclaimed(ctx context.Context, group, member string, claims []lease.Claim, gs groupState, ref leaseRef) {
	claimed := make(map[int]bool, len(claims))
	for _, c := range claims {
		claimed[c.Partition] = true
	}
	for p, st := range gs.parts {
		if claimed[p] || st.leaseKV == nil || st.leaseKV.Lease != int64(ref.id) {
			continue
		}
		tok, holder, ok := strings.Cut(string(st.leaseKV.Value), " ")
		token, err := strconv.ParseInt(tok, 10, 64)
		if !ok || err != nil || holder != member {
			continue
		}
		s.Release(ctx, lease.PartitionKey(group, p), member, token)
	}
}

// round writes a renewal round's member record and claims and returns the
// group's keys as they are afterwards, or lease.ErrNotFound for a group
// never joined. Claims on lease not are left where they are.
func (s *Store) round(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration, id, not clientv3.LeaseID) ([]*mvccpb.KeyValue, error) {
	base := s.groupBase(group)
	exists := clientv3.Compare(clientv3.Version(base+"n"), ">", 0)
	var attach []clientv3.Op
	for _, c := range claims {
		k := s.keysOf(lease.PartitionKey(group, c.Partition))
		value := tenureValue(c.Token, member)
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(k.lease), "=", value),
			clientv3.Compare(clientv3.LeaseValue(k.lease), "!=", id),
		}
		if not != clientv3.NoLease {
			cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(k.lease), "!=", not))
		}
		attach = append(attach, clientv3.OpTxn(cmps, []clientv3.Op{clientv3.OpPut(k.lease, value, clientv3.WithLease(id))}, nil))
	}
	for len(attach) > claimsPerTxn {
		resp, err := s.client.Txn(ctx).If(exists).Then(attach[:claimsPerTxn]...).Commit()
		if err != nil {
			return nil, err
		}
		if !resp.Succeeded {
			return nil, lease.ErrNotFound
		}
		attach = attach[claimsPerTxn:]
	}
	now := time.Now()
	ops := append(attach,
		clientv3.OpPut(s.memberKey(group, member), memberValue{UntilMs: now.Add(ttl).UnixMilli(), TTLMs: ttl.Milliseconds()}.encode(),
			clientv3.WithLease(id)),
		clientv3.OpGet(base, clientv3.WithPrefix()))
	resp, err := s.client.Txn(ctx).If(exists).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		return nil, lease.ErrNotFound
	}
	return resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs, nil
}

// Leave implements lease.Store: it deletes the member record. The member's
// etcd lease, and the partitions on it, live on while they are renewed.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return s.wrap(fmt.Sprintf("leave group %q", group), err)
	}
	_, err := s.client.Delete(ctx, s.memberKey(group, member))
	return s.wrap(fmt.Sprintf("leave group %q", group), err)
}

// GetGroup implements lease.Store: one read, and a LeaseTimeToLive per
// partition lease that no live member shares.
func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	g, _, err := s.getGroup(ctx, group)
	return g, s.wrap(fmt.Sprintf("get group %q", group), err)
}

// getGroup returns the group and the revision it was read at.
func (s *Store) getGroup(ctx context.Context, group string) (lease.Group, int64, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, 0, err
	}
	resp, err := s.client.Get(ctx, s.groupBase(group), clientv3.WithPrefix())
	if err != nil {
		return lease.Group{}, 0, err
	}
	gs, err := s.parseGroup(group, resp.Kvs)
	if err != nil {
		return lease.Group{}, 0, err
	}
	if !gs.found {
		return lease.Group{}, resp.Header.Revision, lease.ErrNotFound
	}
	g, err := s.groupView(ctx, group, gs, nil)
	return g, resp.Header.Revision, err
}
