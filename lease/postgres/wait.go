package postgres

import (
	"context"
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
	return lease.AwaitTenure(ctx, s.waitFor, s.Get, name, seen, timeout)
}

// WaitGroup is Wait for a whole group: a notification for the group (a
// member joined or left) or for one of its partitions wakes it, and it
// compares with lease.SameGroup.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	return lease.AwaitGroup(ctx, s.waitFor, s.GetGroup, group, seen, timeout)
}

// waitFor waits on key's notifications until changed reports a change
// (lease.Listener.Wait). Without a listener (leaderrun_listen=off) it
// polls.
func (s *Store) waitFor(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	if s.listener == nil {
		n := lease.Notified{Closed: s.closed, Poll: pollInterval, State: func() lease.Notice { return lease.Notice{} }}
		return n.Loop(ctx, timeout, changed)
	}
	return s.listener.Wait(ctx, key, s.closed, pollInterval, timeout, changed)
}
