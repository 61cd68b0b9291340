package kubernetes

import (
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// TestTakeoverWaitsForTheEarliestServerTime: while the server's clock may
// still read before a lease's expiry (lo), a follower must not take it,
// even if it may already read after (hi).
func TestTakeoverWaitsForTheEarliestServerTime(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	held, err := grant(nil, "n", "a", nil, time.Second, start, start)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := start.Add(900*time.Millisecond), start.Add(1500*time.Millisecond)
	_, err = grant(held, "n", "b", nil, time.Second, lo, hi)
	var refused *lease.HeldError
	if !errors.As(err, &refused) {
		t.Fatalf("Acquire while the server's clock may read before the expiry = %v, want *lease.HeldError", err)
	}
	if got := refused.Record.Remaining; got != 100*time.Millisecond {
		t.Errorf("remaining = %v, want 100ms (from the earliest server time)", got)
	}
	if _, err := grant(held, "n", "b", nil, time.Second, start.Add(time.Second), start.Add(time.Second)); err != nil {
		t.Errorf("Acquire once the server's clock surely passed the expiry: %v", err)
	}
}

// TestHolderTrustsUntilTheLatestServerTime: a holder's lease is over as
// soon as the server's clock may read past its expiry (hi).
func TestHolderTrustsUntilTheLatestServerTime(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	held, err := grant(nil, "n", "a", nil, time.Second, start, start)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := start.Add(900*time.Millisecond), start.Add(1100*time.Millisecond)
	if _, err := renew(held, "a", held.Token, time.Second, hi); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew when the server's clock may be past the expiry = %v, want ErrLost", err)
	}
	if err := func() error { _, err := release(held, "a", held.Token, hi); return err }(); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release when the server's clock may be past the expiry = %v, want ErrLost", err)
	}
	if _, err := renew(held, "a", held.Token, time.Second, lo); err != nil {
		t.Errorf("Renew before the expiry: %v", err)
	}
}

// TestTokenFloor: a grant's token is above the last one and at least the
// server's clock in milliseconds, also after a foreign holder.
func TestTokenFloor(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r, _ := grant(&rec{Holder: "x", Token: now.UnixMilli() + 5000, Released: true}, "n", "a", nil, time.Second, now, now)
	if got, want := r.Token, now.UnixMilli()+5001; got != want {
		t.Errorf("token after %d = %d, want %d", now.UnixMilli()+5000, got, want)
	}
	r, _ = grant(&rec{Holder: "cg", Token: 7, Released: true, foreign: true, prev: now.UnixMilli() + 9000}, "n", "a", nil, time.Second, now, now)
	if got, want := r.Token, now.UnixMilli()+9001; got != want {
		t.Errorf("token after a foreign holder = %d, want %d (leaderrun's last + 1)", got, want)
	}
}

// TestStepDownReservesAtMostTheWindow: a step-down reserves the name for
// the window from the store's now, never longer, however uncertain the
// server's clock is: the reservation ends by the earliest server time plus
// the window, which the latest server time reaches no later.
func TestStepDownReservesAtMostTheWindow(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	held, err := grant(nil, "n", "a", nil, 10*time.Second, start, start)
	if err != nil {
		t.Fatal(err)
	}
	const window = 5 * time.Second
	lo, hi := start.Add(time.Second), start.Add(1300*time.Millisecond)
	next, view, err := stepDown(held, "n", "", time.Time{}, window, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if view.Reserved <= 0 || view.Reserved > window {
		t.Errorf("reserved for %v from the earliest server time, want at most the window %v", view.Reserved, window)
	}
	if got, want := fromUS(next.ReservedUS), lo.Add(window); got.After(want) {
		t.Errorf("reserved until %v, want no later than %v (the earliest server time + the window)", got, want)
	}
}
