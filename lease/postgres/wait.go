package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Wait blocks until name's tenure may differ from seen (lease.SameTenure),
// until timeout has passed, or until ctx ends. It returns nil in the first
// two cases, ctx's error in the third, and lease.ErrClosed once the Store is
// closed.
//
// With LISTEN on, Wait subscribes on the Store's LISTEN connection, then
// reads the row once and compares it with seen; after that it sleeps until
// a notification for name (acquire, release, step-down and annotate notify;
// renew does not). While that connection is down it polls the row every
// 500 ms, and after it reconnects it reads the row again, because
// notifications sent in between are lost. With leaderrun_listen=off it
// always polls.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return s.waitFor(ctx, name, timeout, func(ctx context.Context) (bool, error) {
		cur, err := s.Get(ctx, name)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Record{}, nil
		}
		return err == nil && !lease.SameTenure(cur, seen), err
	})
}

// WaitGroup is Wait for a whole group: a notification for the group (a
// member joined or left) or for one of its partitions wakes it, and it
// compares with lease.SameGroup.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) error {
	return s.waitFor(ctx, group, timeout, func(ctx context.Context) (bool, error) {
		cur, err := s.GetGroup(ctx, group)
		if errors.Is(err, lease.ErrNotFound) {
			cur, err = lease.Group{}, nil
		}
		return err == nil && !lease.SameGroup(cur, seen), err
	})
}

// waitFor waits for key's notifications until changed, which reads the
// current state, reports a change. It reads once the LISTEN that would
// report a later change has taken effect, and again whenever the listener
// reconnected or, while it is down, every pollInterval. A notification
// ends the wait (it may be spurious; the caller reads again).
func (s *Store) waitFor(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var st listenState // zero: never up, never changes
	wake := make(chan struct{}, 1)
	if s.listener != nil {
		st = s.listener.subscribe(key, wake)
		defer s.listener.unsubscribe(key, wake)
	}
	// checked: the state was read while LISTEN was in effect in epoch
	// st.epoch, so only a notification can report a later change.
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
			st = s.listener.current(key)
			if st.up != prev.up || st.epoch != prev.epoch {
				checked = false
			}
		case <-tick:
		}
	}
}
