package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Wait blocks until name may have changed hands, until timeout has passed,
// or until ctx ends. It returns nil in the first two cases, ctx's error in
// the third, and an error if the Store is closed.
//
// With LISTEN on, Wait sleeps on the Store's LISTEN connection and wakes on
// a notification for name (acquire and release notify; renew does not).
// While that connection is down it polls the row every 500 ms, and after
// it reconnects it re-reads the row once, because notifications sent in
// between are lost. With leaderrun_listen=off it always polls. A change is
// a different holder, token or released flag, or the row appearing or
// disappearing, compared with what this Store last read of name (by
// Acquire or Get) or, failing that, with the first read in Wait.
func (s *Store) Wait(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var st listenState // zero: never up, never changes
	wake := make(chan struct{}, 1)
	if s.listener != nil {
		st = s.listener.subscribe(name, wake)
		defer s.listener.unsubscribe(name, wake)
	}
	obs, hasBase := s.observed(name)
	base := obs.row
	// checked: no change can have been missed since LISTEN took effect in
	// epoch st.epoch. Then only a notification can report a change.
	checked := false
	if hasBase && obs.mark.up && st.up && obs.mark.epoch == st.epoch {
		if st.seq != obs.mark.seq {
			return nil // notified since the caller last read the row
		}
		checked = true
	}

	var poll *time.Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		var tick <-chan time.Time
		if !checked {
			row, err := s.readState(ctx, name, deadline)
			switch {
			case err == nil && hasBase && row != base:
				return nil
			case err == nil:
				base, hasBase = row, true
				checked = st.up
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, errClosed):
				return s.wrap(fmt.Sprintf("wait for lease %q", name), err)
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
			return s.wrap(fmt.Sprintf("wait for lease %q", name), errClosed)
		case <-st.changed:
			prev := st
			st = s.listener.current(name)
			if st.up != prev.up || st.epoch != prev.epoch {
				checked = false
			}
		case <-tick:
		}
	}
}

// readState reads the part of name's row that changes hands, giving up at
// deadline.
func (s *Store) readState(ctx context.Context, name string, deadline time.Time) (rowState, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	rec, err := s.get(rctx, name, listenState{})
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return rowState{}, nil
	case err != nil:
		return rowState{}, err
	}
	return stateOf(rec), nil
}
