package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// Wait implements lease.Store. It watches the name's keys first and, once
// etcd confirmed the watch, reads them once: it returns at once if the
// tenure differs from seen (lease.SameTenure) or is held where seen was
// not or the other way round (it expired). Otherwise the next change to
// the keys ends the wait: an acquisition, a release, a step-down,
// Annotate, and the deletion of the lease key when the tenure expires;
// renewals write nothing and do not wake it (see changes). When the watch
// fails (etcd compacted the revision it resumed from after a broken
// connection, the member lost its leader), Wait watches and reads again.
//
// The read is skipped when the handle knows the keys (see seen) as of the
// very revision the watch starts after — nothing was written to etcd in
// between, as right after a refusal — since etcd reports every later
// change. It never resumes from an older revision instead of reading:
// etcd moves a watch that starts in the past to its live ones only every
// 100 ms, and until then delivers nothing, a release included.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	k := s.keysOf(name)
	differs := func(st nameState) bool {
		cur := st.view(name, time.Now(), justRenewed(1))
		return !lease.SameTenure(cur, seen) || cur.Held() != seen.Held()
	}
	return s.waitFor(ctx, k.base, &k, timeout, func(ctx context.Context, at int64) (bool, int64, error) {
		if st, rev, ok := s.seen.get(name); ok && rev == at {
			// Nothing at all was written to etcd since the handle last
			// learned the keys (a refusal just read them): they are
			// known as of the watch's start.
			return differs(st), rev, nil
		}
		st, rev, err := s.readName(ctx, k, false)
		if err != nil {
			return false, 0, err
		}
		return differs(st), rev, nil
	})
}

// WaitGroup implements lease.Store as Wait does, for the group's keys: a
// member that joins, leaves or expires, and a partition that changes hands
// or expires, end it; a renewal round does not.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	var changed lease.Group
	err := s.waitFor(ctx, s.groupBase(group), nil, timeout, func(ctx context.Context, _ int64) (bool, int64, error) {
		cur, rev, err := s.getGroup(ctx, group)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Group{}, nil
		}
		if err != nil {
			return false, 0, err
		}
		if lease.SameGroup(cur, seen) && sameHeld(cur, seen) {
			return false, rev, nil
		}
		changed = cur
		return true, rev, nil
	})
	return changed, err
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

// Backoff of Wait's attempts while etcd cannot be watched or read.
const (
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
)

// waitFor waits for a change under prefix. With track, the name whose keys
// are under prefix, the watch also keeps what the handle knows of the name
// current (see seen). changed reads the state (it is passed etcd's revision
// when the watch started, as of which it may know it without reading),
// reports whether it differs from what the caller saw, and returns the
// revision it read at. waitFor returns nil
// on a change, a watch event or the timeout, parent's error when parent
// ends and lease.ErrClosed when the store is closed.
func (s *Store) waitFor(parent context.Context, prefix string, track *nameKeys, timeout time.Duration, changed func(context.Context, int64) (bool, int64, error)) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(parent, timeout, errTimedOut)
	defer cancel()
	retry := retryMin
	for {
		woke, err := s.watchAndRead(ctx, prefix, track, changed)
		switch {
		case lease.IfClosed(s.closed) != nil:
			return lease.ErrClosed
		case ctx.Err() != nil:
			return ended(parent, ctx)
		case woke:
			return nil
		case err == nil:
			retry = retryMin // the watch failed after it worked: at once
			continue
		}
		// etcd cannot be watched or read now: try again, as a poll would.
		select {
		case <-time.After(retry):
			retry = min(2*retry, retryMax)
		case <-ctx.Done():
			return ended(parent, ctx)
		case <-s.closed:
			return lease.ErrClosed
		}
	}
}

// watchAndRead watches prefix from now, waits until etcd confirmed the
// watch, then calls changed, and waits for an event after the revision
// changed read at (applying every event to seen, with track) (the member that serves the watch may lag behind the
// read, and replay changes the read already saw). It returns true on a
// change or an event; false and nil when the watch failed after it was in
// place (read again); false and an error when it could not be set up or
// read; and false and nil when ctx ended or the store closed (the caller
// tells which).
func (s *Store) watchAndRead(ctx context.Context, prefix string, track *nameKeys, changed func(context.Context, int64) (bool, int64, error)) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	var at int64 // etcd's revision when the watch started: it reports every later change
	select {
	case resp, ok := <-events:
		if !ok || resp.Err() != nil || resp.Canceled || !resp.Created {
			return false, errWatch(resp, ok)
		}
		at = resp.Header.Revision
	case <-ctx.Done():
		return false, nil
	case <-s.closed:
		return false, nil
	}
	moved, rev, err := changed(ctx, at)
	if moved || err != nil {
		return moved, err
	}
	if track != nil {
		// From now on every change reaches seen through this watch,
		// until it ends.
		s.seen.watching(track.name, 1)
		defer s.seen.watching(track.name, -1)
	}
	if s.waiting != nil {
		s.waiting()
	}
	for {
		select {
		case resp, ok := <-events:
			if track != nil && ok {
				s.seen.apply(*track, resp.Events)
			}
			switch {
			case !ok || resp.Err() != nil || resp.Canceled:
				return false, nil
			case slices.ContainsFunc(resp.Events, func(ev *clientv3.Event) bool { return ev.Kv.ModRevision > rev && changes(prefix, ev) }):
				return true, nil
			}
		case <-ctx.Done():
			return false, nil
		case <-s.closed:
			return false, nil
		}
	}
}

func errWatch(resp clientv3.WatchResponse, ok bool) error {
	if err := resp.Err(); err != nil {
		return err
	}
	if !ok {
		return errors.New("watch ended before etcd confirmed it")
	}
	return errors.New("watch not confirmed by etcd")
}

// changes reports whether ev, an event under prefix, may change what a
// waiter sees. Rewrites of an existing member record (a renewal round) or
// lease key (a tenure moved to another etcd lease) change nothing: every
// change of hands writes the record or the released key, or creates or
// deletes the lease key, and a member that joins creates its record.
func changes(prefix string, ev *clientv3.Event) bool {
	if ev.Type != clientv3.EventTypePut || ev.Kv.Version == 1 {
		return true
	}
	rest := strings.TrimPrefix(string(ev.Kv.Key), prefix)
	return !strings.HasPrefix(rest, "m/") && rest != "lease" && !strings.HasSuffix(rest, "/lease")
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
