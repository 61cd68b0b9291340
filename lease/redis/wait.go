package redis

import (
	"context"
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
	return lease.AwaitTenure(ctx, s.waitFor, s.Get, name, seen, timeout)
}

// WaitGroup is Wait for a whole group: a message for the group (a member
// joined or left) or for one of its partitions wakes it, and it compares
// with lease.SameGroup.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	return lease.AwaitGroup(ctx, s.waitFor, s.GetGroup, group, seen, timeout)
}

// waitFor waits for key's messages until changed, which reads the current
// state, reports a change (lease.Listener.Wait): it reads once the
// subscription that would report a later change is confirmed, again after
// every message (at most once per lease.RereadGap) and resubscription, and
// every pollInterval while the subscription is down.
func (s *Store) waitFor(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	select {
	case <-s.closed:
		return lease.ErrClosed
	default:
	}
	return s.sub.Wait(ctx, key, s.closed, pollInterval, timeout, changed)
}
