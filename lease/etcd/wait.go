package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// Wait implements lease.Store. It reads the name's keys once, returns at
// once if the tenure differs from seen (lease.SameTenure) or is held where
// seen was not or the other way round (it expired), and otherwise watches
// the name's keys from the revision after that read, so that no change in
// between is missed. Any change to them ends the wait: an acquisition, a
// release, a step-down, Annotate, and the deletion of the lease key when
// the tenure expires; renewals write nothing and do not wake it. When the
// watch fails (etcd compacted the revision, the member lost its leader,
// the connection broke), Wait reads again and watches from there.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	k := s.keysOf(name)
	return s.waitFor(ctx, k.base, timeout, func(ctx context.Context) (int64, bool, error) {
		st, rev, err := s.readName(ctx, k, false)
		if err != nil {
			return 0, false, err
		}
		cur := st.view(name, time.Now(), justRenewed(1))
		return rev, !lease.SameTenure(cur, seen) || cur.Held() != seen.Held(), nil
	})
}

// WaitGroup implements lease.Store as Wait does, for the group's keys: a
// member that joins, leaves or expires, and a partition that changes hands
// or expires, end it.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) error {
	return s.waitFor(ctx, s.groupBase(group), timeout, func(ctx context.Context) (int64, bool, error) {
		cur, rev, err := s.getGroup(ctx, group)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Group{}, nil
		}
		if err != nil {
			return 0, false, err
		}
		return rev, !lease.SameGroup(cur, seen) || !sameHeld(cur, seen), nil
	})
}

// sameHeld reports whether the same partitions are held in a and b.
func sameHeld(a, b lease.Group) bool {
	for p := range min(len(a.Leases), len(b.Leases)) {
		if a.Leases[p].Held() != b.Leases[p].Held() {
			return false
		}
	}
	return true
}

// Backoff of Wait's reads while etcd cannot be read.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// waitFor waits for a change under prefix. read returns the revision it
// read at and whether the state differs from what the caller saw. It
// returns nil on a change, a watch event or the timeout, ctx's error when
// ctx ends and lease.ErrClosed when the store is closed.
func (s *Store) waitFor(parent context.Context, prefix string, timeout time.Duration, read func(context.Context) (int64, bool, error)) error {
	if err := s.open(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(parent, timeout, errTimedOut)
	defer cancel()
	retry := retryMin
	for {
		rev, changed, err := read(ctx)
		switch {
		case s.open() != nil:
			return lease.ErrClosed
		case ctx.Err() != nil:
			return ended(parent, ctx)
		case changed:
			return nil
		case err != nil:
			// etcd cannot be read now: try again, as a poll would.
			select {
			case <-time.After(retry):
				retry = min(2*retry, retryMax)
				continue
			case <-ctx.Done():
				return ended(parent, ctx)
			case <-s.closed:
				return lease.ErrClosed
			}
		}
		retry = retryMin
		if s.beforeWatch != nil {
			s.beforeWatch()
		}
		woke, err := s.watch(parent, ctx, prefix, rev+1)
		switch {
		case err != nil:
			return err
		case woke:
			return nil
		}
	}
}

// watch watches prefix from rev until an event (true), the watch failed
// (false: read again), or ctx ended or the store closed (an error).
func (s *Store) watch(parent, ctx context.Context, prefix string, rev int64) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	for {
		select {
		case resp, ok := <-events:
			switch {
			case !ok || resp.Err() != nil || resp.Canceled:
				return false, nil
			case len(resp.Events) > 0:
				return true, nil
			}
		case <-ctx.Done():
			return false, ended(parent, ctx)
		case <-s.closed:
			return false, lease.ErrClosed
		}
	}
}

// errTimedOut is the cause of the context that carries Wait's timeout.
var errTimedOut = errors.New("wait timed out")

// ended is Wait's result once ctx, parent with Wait's timeout, ended: nil
// at the timeout, parent's error otherwise.
func ended(parent, ctx context.Context) error {
	if context.Cause(ctx) == errTimedOut {
		return nil
	}
	return parent.Err()
}
