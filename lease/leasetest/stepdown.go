package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The step-down cases of the conformance suite. Windows are short because
// the suite waits them out in real time.

// candidate makes holder a candidate for name: an Acquire that is refused.
func candidate(t *testing.T, s lease.Store, name, holder string, ttl time.Duration) {
	t.Helper()
	var held *lease.HeldError
	if _, err := s.Acquire(ctx(t), name, holder, ttl); !errors.As(err, &held) {
		t.Fatalf("Acquire(%q, %q) = %v, want *lease.HeldError (the name is held)", name, holder, err)
	}
}

func mustRelease(t *testing.T, s lease.Store, rec lease.Record) {
	t.Helper()
	if err := s.Release(ctx(t), rec.Name, rec.Holder, rec.Token); err != nil {
		t.Fatalf("Release(%q, %q): %v", rec.Name, rec.Holder, err)
	}
}

func mustStepDown(t *testing.T, s lease.Store, name, successor string, window time.Duration) lease.Record {
	t.Helper()
	rec, err := s.RequestStepDown(ctx(t), name, successor, window)
	if err != nil {
		t.Fatalf("RequestStepDown(%q, %q): %v", name, successor, err)
	}
	if !rec.StepDown || rec.Successor != successor || rec.Reserved <= 0 || rec.Reserved > window {
		t.Fatalf("RequestStepDown(%q, %q, %v) = %+v, want StepDown, that successor and a reservation of at most the window",
			name, successor, window, rec)
	}
	return rec
}

// wantRefused checks that holder may not acquire name, and that the
// refusal tells it to wait more than zero and at most limit.
func wantRefused(t *testing.T, s lease.Store, name, holder string, limit time.Duration) lease.Record {
	t.Helper()
	_, err := s.Acquire(ctx(t), name, holder, ttl)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire(%q, %q) = %v, want *lease.HeldError", name, holder, err)
	}
	if r := held.Record.Remaining; r <= 0 || r > limit {
		t.Errorf("Acquire(%q, %q) refused with Remaining %v, want in (0, %v]", name, holder, r, limit)
	}
	return held.Record
}

func testStepDownNeedsAHolder(t *testing.T, h Harness) {
	a := open(t, h)
	if _, err := a.RequestStepDown(ctx(t), "n", "", time.Minute); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("RequestStepDown of an unknown name = %v, want ErrNotFound", err)
	}
	rec := mustAcquire(t, a, "n", "a", ttl)
	mustRelease(t, a, rec)
	if _, err := a.RequestStepDown(ctx(t), "n", "", time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("RequestStepDown of a released name = %v, want ErrNotHeld", err)
	}
	short := mustAcquire(t, a, "n", "a", 200*time.Millisecond)
	waitExpired(short)
	if _, err := a.RequestStepDown(ctx(t), "n", "", time.Minute); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("RequestStepDown of an expired name = %v, want ErrNotHeld", err)
	}
	// Nothing changed: the last holder may take the name back at once.
	got, err := a.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.StepDown || got.Reserved > 0 {
		t.Errorf("after refused requests, record = %+v, want no step-down and no reservation", got)
	}
	mustAcquire(t, a, "n", "a", ttl)
}

func testStepDownBadSuccessor(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	candidate(t, b, "n", "short-lived", 100*time.Millisecond) // seen until 200ms from now
	for _, tc := range []struct {
		successor string
		want      error
	}{
		{"nobody", lease.ErrUnknownSuccessor},
		{"a", lease.ErrAlreadyLeader},
	} {
		if _, err := b.RequestStepDown(ctx(t), "n", tc.successor, time.Minute); !errors.Is(err, tc.want) {
			t.Errorf("RequestStepDown to %q = %v, want %v", tc.successor, err, tc.want)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := b.RequestStepDown(ctx(t), "n", "short-lived", time.Minute); !errors.Is(err, lease.ErrUnknownSuccessor) {
		t.Errorf("RequestStepDown to a candidate not seen for 2×ttl = %v, want ErrUnknownSuccessor", err)
	}
	// Nothing changed: the holder's renewal sees no request.
	renewed, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if renewed.StepDown || renewed.Reserved > 0 || renewed.Token != rec.Token {
		t.Errorf("after refused requests, Renew = %+v, want token %d, no step-down, no reservation", renewed, rec.Token)
	}
}

func testRenewSeesStepDown(t *testing.T, h Harness) {
	a, op := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	if rec.StepDown {
		t.Errorf("fresh tenure has StepDown set: %+v", rec)
	}
	asked := mustStepDown(t, op, "n", "", time.Minute)
	if asked.Holder != "a" || asked.Token != rec.Token || asked.Excluded != "a" {
		t.Errorf("RequestStepDown = %+v, want holder a, token %d, a excluded", asked, rec.Token)
	}
	renewed, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl)
	if err != nil {
		t.Fatalf("Renew after a step-down request: %v (want success with StepDown)", err)
	}
	if !renewed.StepDown || renewed.Token != rec.Token || !renewed.Held() {
		t.Errorf("Renew after a step-down request = %+v, want held, StepDown, token %d", renewed, rec.Token)
	}
	got, err := op.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !got.StepDown || got.Excluded != "a" {
		t.Errorf("Get = %+v, want StepDown with a excluded", got)
	}
}

func testStepDownExcludesHolder(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	const window = 10 * time.Second
	first := mustAcquire(t, a, "n", "a", ttl)
	mustStepDown(t, b, "n", "", window)
	mustRelease(t, a, first)
	refused := wantRefused(t, a, "n", "a", window)
	if refused.Excluded != "a" {
		t.Errorf("refusal record = %+v, want a excluded", refused)
	}
	second := mustAcquire(t, b, "n", "b", ttl)
	if second.Token <= first.Token {
		t.Errorf("token after step-down = %d, want > %d", second.Token, first.Token)
	}
	if second.StepDown || second.Reserved > 0 || second.Successor != "" || second.Excluded != "" {
		t.Errorf("acquisition kept the step-down: %+v", second)
	}
}

func testStepDownToSuccessor(t *testing.T, h Harness) {
	a, b, c := open(t, h), open(t, h), open(t, h)
	const window = 10 * time.Second
	first := mustAcquire(t, a, "n", "a", ttl)
	candidate(t, b, "n", "b", ttl)
	candidate(t, c, "n", "c", ttl)
	mustStepDown(t, b, "n", "c", window)
	// While a still holds it, c must wait for a, not for the window: the
	// refusal names a's tenure.
	_, err := c.Acquire(ctx(t), "n", "c", ttl)
	wantHeld(t, err, "a", first.Token)
	mustRelease(t, a, first)
	wantRefused(t, b, "n", "b", window)
	wantRefused(t, a, "n", "a", window)
	second := mustAcquire(t, c, "n", "c", ttl)
	if second.Token <= first.Token || second.Reserved > 0 || second.StepDown {
		t.Errorf("successor's grant = %+v, want token > %d and no reservation", second, first.Token)
	}
}

func testReservationEnds(t *testing.T, h Harness) {
	a, b, c := open(t, h), open(t, h), open(t, h)
	const window = 500 * time.Millisecond
	rec := mustAcquire(t, a, "n", "a", ttl)
	candidate(t, c, "n", "c", ttl)
	mustStepDown(t, b, "n", "c", window)
	mustRelease(t, a, rec)
	refused := wantRefused(t, b, "n", "b", window)
	time.Sleep(refused.Remaining + 50*time.Millisecond)
	// c never came: after the window anyone may take it.
	rec = mustAcquire(t, b, "n", "b", ttl)

	// Without a successor, the holder that stepped down may take the name
	// back once the window has passed.
	mustStepDown(t, a, "n", "", window)
	mustRelease(t, b, rec)
	refused = wantRefused(t, b, "n", "b", window)
	time.Sleep(refused.Remaining + 50*time.Millisecond)
	mustAcquire(t, b, "n", "b", ttl)
}

func testStepDownReleaseWakesWaiter(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	candidate(t, b, "n", "b", ttl)
	asked := mustStepDown(t, a, "n", "b", time.Minute)
	woke := waitInBackground(t, b, "n", asked)
	released := time.Now()
	mustRelease(t, a, rec)
	wantWoken(t, woke, released)
	mustAcquire(t, b, "n", "b", ttl)
}

// testStepDownToMember: for a partition, a live member of its group may be
// named successor though it never tried to acquire the partition; a member
// that left or expired may not, nor may a member be named for a name that
// is not one of its group's partitions.
func testStepDownToMember(t *testing.T, h Harness) {
	a, b, d, op := open(t, h), open(t, h), open(t, h), open(t, h)
	const (
		group  = "g"
		n      = 4
		window = 10 * time.Second
	)
	key := lease.PartitionKey(group, 1)
	mustJoinFor(t, op, group, n, "expired", 300*time.Millisecond)
	mustJoin(t, a, group, n, "a")
	mustJoin(t, b, group, n, "b")
	mustJoin(t, op, group, n, "c")
	mustJoin(t, d, group, n, "d")
	first := mustAcquire(t, a, key, "a", ttl)
	plain := mustAcquire(t, a, group, "a", ttl) // a name, not a partition
	other := mustAcquire(t, a, lease.PartitionKey("other", 1), "a", ttl)
	if err := op.Leave(ctx(t), group, "c"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	time.Sleep(350 * time.Millisecond) // the record of "expired" expires
	for _, tc := range []struct{ name, successor, why string }{
		{key, "c", "a member that left"},
		{key, "expired", "a member whose record expired"},
		{key, "nobody", "no member"},
		{plain.Name, "b", "a member, for a name that is not a partition"},
		{other.Name, "b", "a member of another group"},
	} {
		if _, err := op.RequestStepDown(ctx(t), tc.name, tc.successor, window); !errors.Is(err, lease.ErrUnknownSuccessor) {
			t.Errorf("RequestStepDown(%q) to %s = %v, want ErrUnknownSuccessor", tc.name, tc.why, err)
		}
	}
	// Nothing changed: the holder's renewals see no request.
	for _, rec := range []lease.Record{first, plain, other} {
		renewed, err := a.Renew(ctx(t), rec.Name, "a", rec.Token, ttl)
		if err != nil {
			t.Fatalf("Renew(%q): %v", rec.Name, err)
		}
		if renewed.StepDown || renewed.Reserved > 0 || renewed.Successor != "" || renewed.Token != rec.Token {
			t.Errorf("after refused requests, Renew(%q) = %+v, want token %d, no step-down, no reservation", rec.Name, renewed, rec.Token)
		}
	}

	asked := mustStepDown(t, op, key, "b", window)
	if asked.Holder != "a" || asked.Token != first.Token {
		t.Errorf("RequestStepDown to member b = %+v, want holder a, token %d", asked, first.Token)
	}
	mustRelease(t, a, first)
	wantRefused(t, d, key, "d", window)
	second := mustAcquire(t, b, key, "b", ttl)
	if second.Token <= first.Token {
		t.Errorf("member b's grant = %+v, want token > %d", second, first.Token)
	}
}
