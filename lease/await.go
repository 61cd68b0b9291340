package lease

import (
	"context"
	"errors"
	"time"
)

// A WaitFunc is a store's way to wait for a key: it installs the store's
// wake-up for key (a notification channel, a file watch, a poller), then
// calls changed, which reads the current state and compares it with what
// the caller saw, first with the wake-up already in place and again after
// every wake-up, until changed reports a change (nil), until timeout
// (nil), until ctx ends (ctx's error) or until the store is closed
// (ErrClosed). Notified.Loop is the loop for stores with a notification
// channel.
type WaitFunc func(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error

// AwaitTenure is Store.Wait for a store that waits with wait and reads
// with get: it ends once name's tenure may differ from seen (SameTenure).
// A name that get does not find counts as the zero Record.
func AwaitTenure(ctx context.Context, wait WaitFunc, get func(context.Context, string) (Record, error),
	name string, seen Record, timeout time.Duration) error {
	return wait(ctx, name, timeout, func(ctx context.Context) (bool, error) {
		cur, err := get(ctx, name)
		if errors.Is(err, ErrNotFound) {
			cur, err = Record{}, nil
		}
		return err == nil && !SameTenure(cur, seen), err
	})
}

// AwaitGroup is Store.WaitGroup for a store that waits with wait and reads
// with get: it ends once the group differs from seen (SameGroup), and
// returns the group read then (the zero Group when it ended otherwise).
// A group that get does not find counts as the zero Group.
func AwaitGroup(ctx context.Context, wait WaitFunc, get func(context.Context, string) (Group, error),
	group string, seen Group, timeout time.Duration) (Group, error) {
	var changed Group
	err := wait(ctx, group, timeout, func(ctx context.Context) (bool, error) {
		cur, err := get(ctx, group)
		if errors.Is(err, ErrNotFound) {
			cur, err = Group{}, nil
		}
		if err != nil || SameGroup(cur, seen) {
			return false, err
		}
		changed = cur
		return true, nil
	})
	return changed, err
}
