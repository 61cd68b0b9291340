package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The cases of Annotate and Seize, the same-host fast path's operations.

func testAnnotate(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	if rec.Where != "" {
		t.Errorf("fresh grant has Where %q, want empty", rec.Where)
	}
	seen := refusedBy(t, b, "n", "b")
	woke := waitInBackground(t, b, "n", seen)
	annotated := time.Now()
	if err := a.Annotate(ctx(t), "n", "a", rec.Token, "boot=x pid=1"); err != nil {
		t.Fatalf("Annotate: %v", err)
	}
	wantWoken(t, woke, annotated)
	got, err := b.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Where != "boot=x pid=1" || got.Token != rec.Token {
		t.Errorf("after Annotate, record = %+v, want Where %q and token %d", got, "boot=x pid=1", rec.Token)
	}
	if err := a.Annotate(ctx(t), "n", "a", rec.Token-1, "elsewhere"); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Annotate with a wrong token = %v, want ErrLost", err)
	}
	if err := b.Annotate(ctx(t), "n", "b", rec.Token, "elsewhere"); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Annotate by another holder = %v, want ErrLost", err)
	}
	renewed, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl)
	if err != nil || renewed.Where != "boot=x pid=1" {
		t.Errorf("Renew after Annotate = %+v, %v; want the Where kept", renewed, err)
	}
	mustRelease(t, a, rec)
	next := mustAcquire(t, b, "n", "b", ttl)
	if next.Where != "" {
		t.Errorf("a new grant kept the old Where %q", next.Where)
	}
}

func testSeize(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	dead := mustAcquire(t, a, "n", "a", ttl)
	seen := refusedBy(t, b, "n", "b")
	rec, err := b.Seize(ctx(t), "n", "b", seen, ttl)
	if err != nil {
		t.Fatalf("Seize from the proved-dead holder: %v", err)
	}
	if rec.Holder != "b" || rec.Token <= dead.Token || !rec.Held() {
		t.Errorf("Seize = %+v, want held by b with a token > %d", rec, dead.Token)
	}
	if _, err := a.Renew(ctx(t), "n", "a", dead.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("the seized holder's Renew = %v, want ErrLost", err)
	}
	// A free name is granted as by Acquire, whatever dead says.
	mustRelease(t, b, rec)
	again, err := a.Seize(ctx(t), "n", "a", rec, ttl)
	if err != nil || again.Token <= rec.Token {
		t.Errorf("Seize of a released name = %+v, %v; want a grant with a token > %d", again, err, rec.Token)
	}
}

func testSeizeChanged(t *testing.T, h Harness) {
	a, b, c := open(t, h), open(t, h), open(t, h)
	first := mustAcquire(t, a, "n", "a", ttl)
	mustRelease(t, a, first)
	second := mustAcquire(t, b, "n", "b", ttl)
	// c saw a's tenure die, but b holds the name by now: refused.
	_, err := c.Seize(ctx(t), "n", "c", first, ttl)
	wantHeld(t, err, "b", second.Token)
	// A step-down reservation for another keeps c out even from a dead
	// holder.
	candidate(t, a, "n", "a", ttl)
	mustStepDown(t, a, "n", "a", time.Minute)
	cur, err := c.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if _, err := c.Seize(ctx(t), "n", "c", cur, ttl); !isHeld(err) {
		t.Errorf("Seize against a reservation for another = %v, want *lease.HeldError", err)
	}
	rec, err := a.Seize(ctx(t), "n", "a", cur, ttl)
	if err != nil || rec.Holder != "a" {
		t.Errorf("the successor's Seize from a dead holder = %+v, %v; want granted", rec, err)
	}
}

// testSeizeAtStepDown: a step-down without a successor keeps only the
// holder out, so a follower may seize from the holder while it stops (the
// leader's stopping word at a step-down), and the token goes up.
func testSeizeAtStepDown(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	held := mustAcquire(t, a, "n", "a", ttl)
	candidate(t, b, "n", "b", ttl)
	asked := mustStepDown(t, b, "n", "", time.Minute)
	rec, err := b.Seize(ctx(t), "n", "b", asked, ttl)
	if err != nil {
		t.Fatalf("Seize by another during an open step-down: %v", err)
	}
	if rec.Holder != "b" || rec.Token <= held.Token || rec.StepDown || rec.Reserved != 0 {
		t.Errorf("Seize = %+v, want held by b with a token > %d, the step-down and reservation cleared", rec, held.Token)
	}
}

func isHeld(err error) bool {
	var held *lease.HeldError
	return errors.As(err, &held)
}
