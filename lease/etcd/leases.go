package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// revocationDelay bounds how long after an etcd lease expires etcd takes to
// delete the keys attached to it: its leader looks for expired leases every
// 500 ms and revokes them through raft. Until then the name is not free.
const revocationDelay = 600 * time.Millisecond

// revokeTimeout bounds the clean-up revocation of a lease no tenure uses.
const revokeTimeout = 2 * time.Second

// ttlSeconds rounds ttl up to whole seconds, etcd's lease unit: a lease is
// never shorter than asked.
func ttlSeconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// leaseTime is what the store knows of an etcd lease's time left.
type leaseTime struct {
	// left is an upper bound of the time until the lease expires; gone
	// reports a lease etcd no longer has (revoked or expired).
	left time.Duration
	gone bool
	// granted is the lease's TTL, to estimate the last renewal; 0 when
	// unknown.
	granted time.Duration
}

// justRenewed is a lease that etcd granted or renewed to ttl seconds after
// the request was sent: it has at most that left.
func justRenewed(ttl int64) leaseTime {
	d := time.Duration(ttl) * time.Second
	return leaseTime{left: d, granted: d}
}

// reported is a lease as LeaseTimeToLive reported it: ttl whole seconds
// left (rounded down, so under ttl+1), granted for granted seconds; a
// negative ttl means etcd has no such lease.
func reported(ttl, granted int64) leaseTime {
	if ttl < 0 {
		return leaseTime{gone: true}
	}
	return leaseTime{left: time.Duration(ttl+1) * time.Second, granted: time.Duration(granted) * time.Second}
}

// remaining is the time until the name may be free at the latest: the
// lease's time left plus etcd's revocation delay. It is positive: while the
// lease key exists the name is not free.
func (l leaseTime) remaining() time.Duration {
	if l.gone {
		return revocationDelay
	}
	return l.left + revocationDelay
}

// renewed estimates when the lease was last granted or renewed; zero when
// unknown.
func (l leaseTime) renewed(now time.Time) time.Time {
	if l.gone || l.granted == 0 {
		return time.Time{}
	}
	return now.Add(l.left - l.granted)
}

// leaseRef is an etcd lease this handle attached a tenure or member to.
type leaseRef struct {
	id  clientv3.LeaseID
	ttl int64 // seconds, as etcd granted it (etcd may raise a short TTL)
	// asked is the TTL it was asked for, in seconds.
	asked int64
	// until is when the lease expires at the earliest, by the local
	// clock: the last grant's or keep-alive's send time plus ttl (zero
	// when not tracked). A spare past it is not worth a keep-alive.
	until time.Time
	// shared marks a member's lease, which the member's partitions share:
	// never revoked when one tenure ends.
	shared bool
}

type tenureID struct {
	name  string
	token int64
}

type memberID struct {
	group, member string
}

// leases remembers which etcd lease each tenure and member of this handle
// is attached to, so that a renewal needs no read to find it. What it
// remembers is only ever used together with a read or a live watch that
// confirms it.
type leases struct {
	mu      sync.Mutex // guards the fields below
	tenures map[tenureID]leaseRef
	members map[memberID]leaseRef
	// spare is a lease an Acquire got and did not use (it was refused),
	// kept for the next Acquire: renewing it takes no raft write, granting
	// one does. nil when there is none.
	spare *leaseRef
}

// spareMargin is how long a spare lease must still have, by the local
// clock, to be kept alive rather than replaced by a new one.
const spareMargin = time.Second

// takeSpare returns the spare lease if it was asked with secs and has at
// least spareMargin left, and forgets it. A spare that has expired by the
// local clock is forgotten (etcd deletes it by itself).
func (l *leases) takeSpare(secs int64) (leaseRef, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare != nil && time.Until(l.spare.until) < spareMargin {
		l.spare = nil
	}
	if l.spare == nil || l.spare.asked != secs {
		return leaseRef{}, false
	}
	ref := *l.spare
	l.spare = nil
	return ref, true
}

// dropSpare forgets the spare lease and returns it, if any.
func (l *leases) dropSpare() *leaseRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	spare := l.spare
	l.spare = nil
	return spare
}

// putSpare keeps ref as the spare lease and returns the one it replaces,
// if any, for the caller to revoke.
func (l *leases) putSpare(ref leaseRef) (old *leaseRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, l.spare = l.spare, &ref
	return old
}

func (l *leases) tenure(name string, token int64) (leaseRef, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref, ok := l.tenures[tenureID{name, token}]
	return ref, ok
}

func (l *leases) setTenure(name string, token int64, ref leaseRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenures == nil {
		l.tenures = map[tenureID]leaseRef{}
	}
	l.tenures[tenureID{name, token}] = ref
}

func (l *leases) forgetTenure(name string, token int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.tenures, tenureID{name, token})
}

func (l *leases) member(group, member string) (leaseRef, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref, ok := l.members[memberID{group, member}]
	return ref, ok
}

func (l *leases) setMember(group, member string, ref leaseRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.members == nil {
		l.members = map[memberID]leaseRef{}
	}
	l.members[memberID{group, member}] = ref
}

func (l *leases) forgetMember(group, member string, id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ref, ok := l.members[memberID{group, member}]; ok && ref.id == id {
		delete(l.members, memberID{group, member})
	}
}

// grant asks etcd for a new lease of ttl seconds.
func (s *Store) grant(ctx context.Context, ttl int64) (leaseRef, error) {
	sent := time.Now()
	resp, err := s.client.Grant(ctx, ttl)
	if err != nil {
		return leaseRef{}, err
	}
	return leaseRef{id: resp.ID, ttl: resp.TTL, asked: ttl, until: sent.Add(time.Duration(resp.TTL) * time.Second)}, nil
}

// keepAlive renews lease id once: one LeaseKeepAlive round trip, counted
// by the caller from before it was sent. It returns the lease's TTL, and
// errLeaseGone when etcd no longer has the lease (it expired or was
// revoked; etcd never renews an expired lease).
func (s *Store) keepAlive(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	resp, err := s.client.KeepAliveOnce(ctx, id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return 0, errLeaseGone
	case err != nil:
		return 0, err
	}
	return resp.TTL, nil
}

var errLeaseGone = errors.New("etcd lease expired or revoked")

// revoke revokes a lease that no tenure uses any more, so that it does not
// linger until it expires. It is clean-up only: failures are ignored.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	s.client.Revoke(ctx, id)
}

// revokeLater revokes, in the background, a lease that no tenure uses any
// more; Close waits for it.
// After Close it does nothing: the lease expires on its own.
func (s *Store) revokeLater(id clientv3.LeaseID) {
	s.revokeMu.Lock()
	defer s.revokeMu.Unlock()
	if lease.IfClosed(s.closed) != nil {
		return
	}
	s.revoking.Add(1)
	go func() {
		defer s.revoking.Done()
		s.revoke(id)
	}()
}

// ttlQueries bounds the LeaseTimeToLive requests in flight at once.
const ttlQueries = 16

// leaseTimes asks etcd how long each lease in ids has left, concurrently,
// and adds the answers to known (which it returns; nil makes a new map).
// Leases already in known are not asked about.
func (s *Store) leaseTimes(ctx context.Context, ids []clientv3.LeaseID, known map[clientv3.LeaseID]leaseTime) (map[clientv3.LeaseID]leaseTime, error) {
	if known == nil {
		known = map[clientv3.LeaseID]leaseTime{}
	}
	var ask []clientv3.LeaseID
	seen := map[clientv3.LeaseID]bool{}
	for _, id := range ids {
		if _, ok := known[id]; !ok && !seen[id] && id != clientv3.NoLease {
			seen[id] = true
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return known, nil
	}
	type answer struct {
		id  clientv3.LeaseID
		t   leaseTime
		err error
	}
	answers := make(chan answer, len(ask))
	slots := make(chan struct{}, ttlQueries)
	for _, id := range ask {
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			resp, err := s.client.TimeToLive(ctx, id)
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				answers <- answer{id: id, t: leaseTime{gone: true}}
			case err != nil:
				answers <- answer{id: id, err: err}
			default:
				answers <- answer{id: id, t: reported(resp.TTL, resp.GrantedTTL)}
			}
		}()
	}
	var errs []error
	for range ask {
		a := <-answers
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		known[a.id] = a.t
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return known, nil
}
