package redis

import (
	"context"
	"errors"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// pollInterval is how often Wait reads the state while the subscription is
// down.
const pollInterval = 500 * time.Millisecond

// Wait blocks until name's tenure may differ from seen (lease.SameTenure),
// until timeout has passed, or until ctx ends. It returns nil in the first
// two cases, ctx's error in the third, and lease.ErrClosed once the Store
// is closed.
//
// Wait registers with the Store's subscription to the wake-up channel
// first, reads the record once the SUBSCRIBE is confirmed and compares it
// with seen; after that it sleeps until name is published (acquire, seize,
// release, step-down and annotate publish; renew does not). While the
// subscription is down it polls the record every 500 ms, and after every
// (re)subscription it reads the record again, because what was published
// in between is lost.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return s.waitFor(ctx, name, timeout, func(ctx context.Context) (bool, error) {
		cur, err := s.Get(ctx, name)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Record{}, nil
		}
		return err == nil && !lease.SameTenure(cur, seen), err
	})
}

// WaitGroup is Wait for a whole group: a message for the group (a member
// joined or left) or for one of its partitions wakes it, and it compares
// with lease.SameGroup.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) error {
	return s.waitFor(ctx, group, timeout, func(ctx context.Context) (bool, error) {
		cur, err := s.GetGroup(ctx, group)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Group{}, nil
		}
		return err == nil && !lease.SameGroup(cur, seen), err
	})
}

// waitFor waits for key's messages until changed, which reads the current
// state, reports a change. It reads once the subscription that would
// report a later change is confirmed, again after every resubscription,
// and every pollInterval while the subscription is down. A message ends
// the wait (it may be spurious; the caller reads again).
func (s *Store) waitFor(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	select {
	case <-s.closed:
		return lease.ErrClosed
	default:
	}
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	wake := make(chan struct{}, 1)
	st := s.sub.subscribe(key, wake)
	defer s.sub.unsubscribe(key, wake)
	// checked: the state was read while the subscription was confirmed in
	// epoch st.epoch, so only a message can report a later change.
	checked := false
	var poll *time.Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		var tick <-chan time.Time
		if !checked {
			rctx, cancel := context.WithDeadline(ctx, deadline)
			moved, err := changed(rctx)
			cancel()
			switch {
			case errors.Is(err, lease.ErrClosed):
				return lease.ErrClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case moved:
				return nil
			case err == nil:
				checked = st.up
			}
			if !checked {
				if poll == nil {
					poll = time.NewTimer(pollInterval)
				} else {
					poll.Reset(pollInterval)
				}
				tick = poll.C
			}
		}
		select {
		case <-wake:
			return nil
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return lease.ErrClosed
		case <-st.changed:
			prev := st
			st = s.sub.current()
			if st.up != prev.up || st.epoch != prev.epoch {
				checked = false
			}
		case <-tick:
		}
	}
}
