package lease

import (
	"context"
	"errors"
	"time"
)

// Notice is what a store's notification channel (PostgreSQL's LISTEN, a
// Redis subscription) tells a waiter about itself.
type Notice struct {
	// Up reports that the channel is in effect: a change made from now on
	// will be notified.
	Up bool
	// Epoch counts the times the channel came up; notifications sent while
	// it was down are lost.
	Epoch uint64
	// Changed is closed when Up or Epoch changes.
	Changed <-chan struct{}
}

// Notified is the part of Wait that a store with a notification channel
// shares: how it decides when to read the current state.
type Notified struct {
	// Wake receives a value when a notification for the waiter's key
	// arrives; the store subscribed it before calling Loop.
	Wake <-chan struct{}
	// State returns the channel's state now.
	State func() Notice
	// Closed is closed when the store is closed.
	Closed <-chan struct{}
	// Poll is how often to read while the channel is down.
	Poll time.Duration
}

// RereadGap is the least time Loop leaves between two reads that
// notifications caused: a flood of notifications (anyone who may connect to
// PostgreSQL may NOTIFY any channel) costs a waiter at most one read per
// gap, and never a write. The gap runs from the last such read only, not
// from Loop's first read: a notification soon after a waiter began (a
// release right after the step-down request that woke it) is read at once.
const RereadGap = 100 * time.Millisecond

// Loop waits until changed, which reads the store's current state and
// compares it with what the caller saw, reports a change (it returns nil
// then), until timeout (nil), until ctx ends (ctx's error), or until the
// store is closed (ErrClosed). It reads once the channel is up, and again
// after every notification (at most one read per RereadGap), every time the
// channel came back after being down, and every Poll while it is down. A
// read that fails is retried like a poll; a store error ends nothing.
func (n Notified) Loop(ctx context.Context, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	st := n.State()
	// checked: the state was read while the channel was up in epoch
	// st.Epoch, so only a notification can report a later change.
	checked := false
	// woken: the next read is one a notification caused; lastWoken is
	// when the last of those began.
	woken := false
	var lastWoken time.Time
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var tick <-chan time.Time
		if !checked {
			if gap := RereadGap - time.Since(lastWoken); woken && !lastWoken.IsZero() && gap > 0 {
				retry.Reset(gap)
				tick = retry.C
			} else {
				if woken {
					lastWoken, woken = time.Now(), false
				}
				rctx, cancel := context.WithDeadline(ctx, deadline)
				moved, err := changed(rctx)
				cancel()
				switch {
				case errors.Is(err, ErrClosed):
					return ErrClosed
				case ctx.Err() != nil:
					return ctx.Err()
				case moved:
					return nil
				case err == nil:
					checked = st.Up
				}
				if !checked {
					retry.Reset(n.Poll)
					tick = retry.C
				}
			}
		}
		select {
		case <-n.Wake:
			checked, woken = false, true
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-n.Closed:
			return ErrClosed
		case <-st.Changed:
			prev := st
			st = n.State()
			if st.Up != prev.Up || st.Epoch != prev.Epoch {
				checked = false
			}
		case <-tick:
		}
	}
}
