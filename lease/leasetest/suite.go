package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Harness gives the conformance suite access to one fresh, empty store.
type Harness struct {
	// Open returns a new handle on the store. Handles of one Harness share
	// the same records, as separate processes sharing the store would.
	// The suite closes every handle it opens.
	Open func(t *testing.T) lease.Store
	// Delete removes name's record behind the store's back, as an operator
	// or a restore from backup might.
	Delete func(t *testing.T, name string)
	// Delaying, when set, opens a handle through a proxy (package
	// tcpproxy) and returns it with delay and pass. delay(holder, d)
	// makes the proxy hold back, for d, the reply to the next write that
	// grants a name to holder, and every reply after it: tcpproxy's
	// DelayAfter, with a marker that only that write carries (holder's
	// identity, if the store sends it with no earlier request of an
	// Acquire; COMMIT, if the grant is a transaction). pass ends the
	// delay for replies read later. The suite closes the handle. Leave
	// it nil for a store without a network: the suite then makes a
	// handle from Open answer one Acquire late itself.
	Delaying func(t *testing.T) (s lease.Store, delay func(holder string, d time.Duration), pass func())
	// Listening, for a store with a notification channel, returns once a
	// change of name made now would be notified to a waiter of s's:
	// the channel is up, with such a waiter. Nil: the store has none.
	Listening func(t *testing.T, s lease.Store, name string)
}

// Run runs the conformance suite. newHarness is called once per subtest and
// must return a harness over a store no other subtest uses.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"ExactlyOneOfManyWins", testExactlyOneWins},
		{"ExactlyOneTakesOverExpired", testExactlyOneTakesOverExpired},
		{"ExactlyOneTakesOverReleased", testExactlyOneTakesOverReleased},
		{"HeldNameIsRefusedWithHolder", testHeldIsRefused},
		{"HolderCannotReacquire", testHolderCannotReacquire},
		{"RenewExtendsAndKeepsToken", testRenewExtends},
		{"ExpiryLetsAnotherTakeOver", testExpiryTakeover},
		{"ExpiredUntakenIsLost", testExpiredUntakenIsLost},
		{"OldHolderIsLostAfterTakeover", testLostAfterTakeover},
		{"WrongTokenIsLost", testWrongToken},
		{"EarlierTenureIsLost", testEarlierTenureIsLost},
		{"LostGrantIsReleased", testLostGrantIsReleased},
		{"ReleaseFreesAtOnce", testReleaseFreesAtOnce},
		{"TokensStrictlyIncrease", testTokensIncrease},
		{"ReleaseWakesWaiter", testReleaseWakesWaiter},
		{"ReleaseBeforeWaitIsSeen", testReleaseBeforeWait},
		{"WaitTimesOut", testWaitTimesOut},
		{"WaitEndsWithContext", testWaitEndsWithContext},
		{"CloseEndsWait", testCloseEndsWait},
		{"GetAndList", testGetAndList},
		{"AnnotateSetsWhereAndWakes", testAnnotate},
		{"SeizeFromProvedDeadHolder", testSeize},
		{"SeizeOfChangedTenureIsRefused", testSeizeChanged},
		{"SeizeDuringAnOpenStepDown", testSeizeAtStepDown},
		{"StepDownNeedsAHolder", testStepDownNeedsAHolder},
		{"StepDownBadSuccessorChangesNothing", testStepDownBadSuccessor},
		{"RenewSeesStepDown", testRenewSeesStepDown},
		{"StepDownExcludesHolder", testStepDownExcludesHolder},
		{"StepDownToSuccessor", testStepDownToSuccessor},
		{"ReservationEnds", testReservationEnds},
		{"StepDownReleaseWakesWaiter", testStepDownReleaseWakesWaiter},
		{"StepDownToLiveMember", testStepDownToMember},
		{"CandidatesCarryCandidacy", testCandidacy},
		{"WithdrawEndsCandidacy", testWithdraw},
		{"ForgetDeletesOnlyAFreeName", testForget},
		{"ForgetWakesWaiter", testForgetWakesWaiter},
		{"GroupJoinExpiryAndLeave", testGroupMembers},
		{"GroupPartitionCountIsFixed", testGroupPartitionCount},
		{"GroupBadInputWritesNothing", testGroupBadInput},
		{"GroupRenewReportsHeldAndLost", testGroupRenew},
		{"GroupRoundsRenewOnlyClaims", testGroupRenewsOnlyClaims},
		{"GroupPartitionHasOneOwner", testGroupContendedPartition},
		{"GroupPartitionTokensIncrease", testGroupTokens},
		{"GroupWaitWakesOnChanges", testGroupWait},
		{"GroupWaitSeesEarlierChange", testGroupWaitEarlier},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t))
		})
	}
}

const ttl = 10 * time.Second

func open(t *testing.T, h Harness) lease.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustAcquire(t *testing.T, s lease.Store, name, holder string, ttl time.Duration) lease.Record {
	t.Helper()
	rec, err := s.Acquire(ctx(t), name, holder, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, holder, err)
	}
	if rec.Name != name || rec.Holder != holder || !rec.Held() {
		t.Fatalf("Acquire(%q, %q) = %+v, want a held record of that name and holder", name, holder, rec)
	}
	return rec
}

func wantHeld(t *testing.T, err error, holder string, token int64) {
	t.Helper()
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("err = %v, want *lease.HeldError", err)
	}
	if got, want := held.Record.Holder, holder; got != want {
		t.Errorf("HeldError holder = %q, want %q", got, want)
	}
	if got, want := held.Record.Token, token; got != want {
		t.Errorf("HeldError token = %d, want %d", got, want)
	}
	if held.Record.Remaining <= 0 {
		t.Errorf("HeldError remaining = %v, want > 0", held.Record.Remaining)
	}
}

// waitExpired sleeps out a short lease; the sleep is the thing under test.
func waitExpired(rec lease.Record) { time.Sleep(rec.Remaining + 50*time.Millisecond) }

// race runs acquire by n contenders on their own handles at once, and
// checks that exactly one won and every loser was told the winner.
func race(t *testing.T, h Harness, n int, acquire func(s lease.Store, holder string) (lease.Record, error)) lease.Record {
	t.Helper()
	stores := make([]lease.Store, n)
	for i := range stores {
		stores[i] = open(t, h)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []lease.Record
		errs    []error
	)
	start := make(chan struct{})
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec, err := acquire(s, fmt.Sprintf("contender-%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, rec)
			} else {
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners = %+v, want exactly one", winners)
	}
	for _, err := range errs {
		var held *lease.HeldError
		if !errors.As(err, &held) {
			t.Errorf("loser's error = %v, want *lease.HeldError", err)
			continue
		}
		if got, want := held.Record.Holder, winners[0].Holder; got != want {
			t.Errorf("loser told holder %q, want %q", got, want)
		}
	}
	return winners[0]
}

const contenders = 8

func testExactlyOneWins(t *testing.T, h Harness) {
	race(t, h, contenders, func(s lease.Store, holder string) (lease.Record, error) {
		return s.Acquire(ctx(t), "one", holder, ttl)
	})
}

func testExactlyOneTakesOverExpired(t *testing.T, h Harness) {
	a := open(t, h)
	first := mustAcquire(t, a, "n", "a", 300*time.Millisecond)
	waitExpired(first)
	won := race(t, h, contenders, func(s lease.Store, holder string) (lease.Record, error) {
		return s.Acquire(ctx(t), "n", holder, ttl)
	})
	if won.Token <= first.Token {
		t.Errorf("takeover token %d, want > %d", won.Token, first.Token)
	}
}

func testExactlyOneTakesOverReleased(t *testing.T, h Harness) {
	a := open(t, h)
	first := mustAcquire(t, a, "n", "a", ttl)
	mustRelease(t, a, first)
	won := race(t, h, contenders, func(s lease.Store, holder string) (lease.Record, error) {
		return s.Acquire(ctx(t), "n", holder, ttl)
	})
	if won.Token <= first.Token {
		t.Errorf("takeover token %d, want > %d", won.Token, first.Token)
	}
}

func testExpiredUntakenIsLost(t *testing.T, h Harness) {
	a := open(t, h)
	rec := mustAcquire(t, a, "n", "a", 300*time.Millisecond)
	waitExpired(rec)
	// Nobody took it over, and still the tenure is over: a renewal must
	// not revive it, nor may a release pretend to hand it back.
	if _, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of an expired, untaken lease = %v, want ErrLost", err)
	}
	if err := a.Release(ctx(t), "n", "a", rec.Token); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release of an expired, untaken lease = %v, want ErrLost", err)
	}
	if err := a.Annotate(ctx(t), "n", "a", rec.Token, "here"); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Annotate of an expired, untaken lease = %v, want ErrLost", err)
	}
	got, err := a.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State() != "expired" {
		t.Errorf("state = %q, want expired", got.State())
	}
}

func testHeldIsRefused(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	_, err := b.Acquire(ctx(t), "n", "b", ttl)
	wantHeld(t, err, "a", rec.Token)
}

func testHolderCannotReacquire(t *testing.T, h Harness) {
	a := open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	_, err := a.Acquire(ctx(t), "n", "a", ttl)
	wantHeld(t, err, "a", rec.Token)
}

func testRenewExtends(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", 300*time.Millisecond)
	renewed, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if got, want := renewed.Token, rec.Token; got != want {
		t.Errorf("token after renew = %d, want %d (unchanged)", got, want)
	}
	if renewed.Remaining <= 300*time.Millisecond {
		t.Errorf("remaining after renew = %v, want about %v", renewed.Remaining, ttl)
	}
	waitExpired(rec)
	_, err = b.Acquire(ctx(t), "n", "b", ttl)
	wantHeld(t, err, "a", rec.Token)
}

func testExpiryTakeover(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	first := mustAcquire(t, a, "n", "a", 300*time.Millisecond)
	waitExpired(first)
	second := mustAcquire(t, b, "n", "b", ttl)
	if second.Token <= first.Token {
		t.Errorf("token after takeover = %d, want > %d", second.Token, first.Token)
	}
}

func testLostAfterTakeover(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	first := mustAcquire(t, a, "n", "a", 300*time.Millisecond)
	waitExpired(first)
	second := mustAcquire(t, b, "n", "b", ttl)
	if _, err := a.Renew(ctx(t), "n", "a", first.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("old holder's Renew = %v, want ErrLost", err)
	}
	if err := a.Release(ctx(t), "n", "a", first.Token); !errors.Is(err, lease.ErrLost) {
		t.Errorf("old holder's Release = %v, want ErrLost", err)
	}
	got, err := b.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Holder != "b" || got.Token != second.Token || !got.Held() {
		t.Errorf("after old holder's calls, record = %+v, want held by b with token %d", got, second.Token)
	}
}

func testWrongToken(t *testing.T, h Harness) {
	a := open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	if _, err := a.Renew(ctx(t), "n", "a", rec.Token-1, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew with a wrong token = %v, want ErrLost", err)
	}
	if _, err := a.Renew(ctx(t), "n", "other", rec.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew by another holder = %v, want ErrLost", err)
	}
	if _, err := a.Renew(ctx(t), "never-acquired", "a", rec.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of an unknown name = %v, want ErrLost", err)
	}
	if err := a.Release(ctx(t), "n", "other", rec.Token); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release by another holder = %v, want ErrLost", err)
	}
}

func testReleaseFreesAtOnce(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	first := mustAcquire(t, a, "n", "a", ttl)
	if err := a.Release(ctx(t), "n", "a", first.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	got, err := b.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.State() != "released" {
		t.Errorf("state after release = %q, want released", got.State())
	}
	second := mustAcquire(t, b, "n", "b", ttl)
	if second.Token <= first.Token {
		t.Errorf("token after release = %d, want > %d", second.Token, first.Token)
	}
	if err := a.Release(ctx(t), "n", "a", first.Token); !errors.Is(err, lease.ErrLost) {
		t.Errorf("second Release by the old holder = %v, want ErrLost", err)
	}
}

func testTokensIncrease(t *testing.T, h Harness) {
	a := open(t, h)
	var last int64
	check := func(step string, rec lease.Record) {
		t.Helper()
		if rec.Token <= last {
			t.Errorf("%s: token %d, want > %d", step, rec.Token, last)
		}
		last = rec.Token
	}
	for i := range 5 {
		rec := mustAcquire(t, a, "n", "a", ttl)
		check(fmt.Sprintf("acquire %d after release", i), rec)
		if err := a.Release(ctx(t), "n", "a", rec.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	rec := mustAcquire(t, a, "n", "a", 200*time.Millisecond)
	check("acquire before expiry", rec)
	waitExpired(rec)
	rec = mustAcquire(t, a, "n", "b", ttl)
	check("acquire after expiry", rec)
	h.Delete(t, "n")
	if _, err := a.Get(ctx(t), "n"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	// A deleted record's token is rebuilt from the store's clock alone,
	// which has passed the last grant by the time anyone deletes a
	// record; wait until it has here too, measured by the store itself.
	clockPast(t, a, last)
	rec = mustAcquire(t, a, "n", "c", ttl)
	check("acquire after the record was deleted", rec)
}

// clockPast returns once the store's clock, in milliseconds, is past ms: the
// token of a first grant of a fresh name is that clock's reading.
func clockPast(t *testing.T, s lease.Store, ms int64) {
	t.Helper()
	for i := 0; ; i++ {
		rec := mustAcquire(t, s, fmt.Sprintf("clock-%d", i), "clock", ttl)
		if rec.Token > ms {
			return
		}
		if i > 10000 {
			t.Fatalf("the store's clock stays at %d ms, not past %d", rec.Token, ms)
		}
	}
}

func testReleaseWakesWaiter(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	seen := refusedBy(t, b, "n", "b")
	woke := waitInBackground(t, b, "n", seen)
	// Renewals are not changes of hands: they may wake the waiter, but
	// a waiter woken by one waits again, and must still see the release.
	if _, err := a.Renew(ctx(t), "n", "a", rec.Token, ttl); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	released := time.Now()
	mustRelease(t, a, rec)
	wantWoken(t, woke, released)
}

// refusedBy is the record an Acquire by holder is refused with: what a
// follower has seen when it starts to wait.
func refusedBy(t *testing.T, s lease.Store, name, holder string) lease.Record {
	t.Helper()
	_, err := s.Acquire(ctx(t), name, holder, ttl)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire(%q, %q) = %v, want *lease.HeldError", name, holder, err)
	}
	return held.Record
}

// waitTimeout is how long the suite's Waits would sleep without a wake-up.
const waitTimeout = 20 * time.Second

// wakeLimit is how soon after a change a waiter must wake: a notification,
// not a poll or the timeout.
const wakeLimit = time.Second

// waitInBackground starts s.Wait on name from seen, a follower re-checking
// until the name is no longer the seen tenure (a store may wake it
// spuriously, as on a renewal), and reports when it returned.
func waitInBackground(t *testing.T, s lease.Store, name string, seen lease.Record) <-chan time.Time {
	woke := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(waitTimeout)
		for time.Now().Before(deadline) {
			if err := s.Wait(ctx(t), name, seen, time.Until(deadline)); err != nil {
				t.Errorf("Wait: %v", err)
				break
			}
			cur, err := s.Get(ctx(t), name)
			if errors.Is(err, lease.ErrNotFound) || (err == nil && !lease.SameTenure(cur, seen)) {
				break
			}
		}
		woke <- time.Now()
	}()
	return woke
}

func wantWoken(t *testing.T, woke <-chan time.Time, changed time.Time) {
	t.Helper()
	select {
	case at := <-woke:
		lag := at.Sub(changed)
		t.Logf("waiter woke %v after the change", lag)
		if lag > wakeLimit {
			t.Errorf("waiter woke %v after the change, want within %v (woken, not polled or timed out)", lag, wakeLimit)
		}
	case <-time.After(waitTimeout + 5*time.Second):
		t.Fatal("waiter was not woken")
	}
}

func testReleaseBeforeWait(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	// b has waited and been woken before, as a follower has: whatever
	// wake-up channel b keeps is up and running, so only the comparison
	// with seen can notice the changes below.
	woke := waitInBackground(t, b, "warm-up", lease.Record{})
	h.listening(t, b, "warm-up")
	warmed := time.Now()
	mustAcquire(t, a, "warm-up", "a", ttl)
	wantWoken(t, woke, warmed)
	rec := mustAcquire(t, a, "n", "a", ttl)
	seen := refusedBy(t, b, "n", "b")
	// The release lands between the follower's refused Acquire and its
	// Wait: Wait must see that the name changed since seen. Another
	// waiter of b's takes the release's notification first, so that
	// none is still on its way when Wait begins.
	h.changeNotified(t, b, "n", seen, func() { mustRelease(t, a, rec) })
	wantSeenAtOnce(t, "Wait after an earlier release", func() error { return b.Wait(ctx(t), "n", seen, waitTimeout) })
	// The same for a name that did not exist when seen.
	h.changeNotified(t, b, "fresh", lease.Record{}, func() { mustAcquire(t, a, "fresh", "a", ttl) })
	wantSeenAtOnce(t, "Wait from absent on a name acquired since", func() error {
		return b.Wait(ctx(t), "fresh", lease.Record{}, waitTimeout)
	})
}

// listening returns once a change of name would be notified to a waiter
// of s's (Harness.Listening). Without a notification channel it returns
// at once: the waiter's first read is all there is to wait for.
func (h Harness) listening(t *testing.T, s lease.Store, name string) {
	t.Helper()
	if h.Listening != nil {
		h.Listening(t, s, name)
	}
}

// changeNotified makes change while a waiter of s's waits on name from
// seen, and returns once that waiter has returned: a notification of the
// change, if s has a channel, has come and gone.
func (h Harness) changeNotified(t *testing.T, s lease.Store, name string, seen lease.Record, change func()) {
	t.Helper()
	woke := waitInBackground(t, s, name, seen)
	h.listening(t, s, name)
	change()
	select {
	case <-woke:
	case <-time.After(waitTimeout + 5*time.Second):
		t.Fatalf("a waiter on %q was not woken by the change", name)
	}
}

// wantSeenAtOnce runs wait, a Wait of waitTimeout that must see a change
// made before it: it must return well before that timeout, which it sleeps
// out when it looks for nothing but the next notification.
func wantSeenAtOnce(t *testing.T, what string, wait func() error) {
	t.Helper()
	start := time.Now()
	if err := wait(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if lag := time.Since(start); lag > waitTimeout/2 {
		t.Fatalf("%s returned after %v, want at once (it waited for a notification instead of reading)", what, lag)
	}
}

func testWaitTimesOut(t *testing.T, h Harness) {
	a := open(t, h)
	rec := mustAcquire(t, a, "n", "a", ttl)
	start := time.Now()
	if err := a.Wait(ctx(t), "n", rec, 300*time.Millisecond); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := time.Since(start); got < 250*time.Millisecond || got > 10*time.Second {
		t.Errorf("Wait(300ms) on an unchanging name returned after %v", got)
	}
}

func testWaitEndsWithContext(t *testing.T, h Harness) {
	a := open(t, h)
	c, cancel := context.WithCancel(ctx(t))
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if err := a.Wait(c, "n", lease.Record{}, time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait after cancel = %v, want context.Canceled", err)
	}
}

func testCloseEndsWait(t *testing.T, h Harness) {
	a := h.Open(t) // closed by the test itself
	other := open(t, h)
	rec := mustAcquire(t, other, "n", "other", ttl)
	g := mustJoin(t, other, "g", 2, "other")
	done := make(chan error, 2)
	go func() { done <- a.Wait(ctx(t), "n", rec, time.Minute) }()
	go func() { _, err := a.WaitGroup(ctx(t), "g", g, time.Minute); done <- err }()
	time.Sleep(100 * time.Millisecond) // let both Waits start, or not: either way Close ends them
	closed := time.Now()
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, lease.ErrClosed) {
				t.Errorf("Wait ended by Close = %v, want ErrClosed", err)
			}
			if lag := time.Since(closed); lag > wakeLimit {
				t.Errorf("Wait ended %v after Close, want promptly", lag)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Close did not end a Wait")
		}
	}
	if _, err := a.Get(ctx(t), "n"); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// Other handles go on.
	if _, err := other.Renew(ctx(t), "n", "other", rec.Token, ttl); err != nil {
		t.Errorf("another handle's Renew after Close: %v", err)
	}
}

func testGetAndList(t *testing.T, h Harness) {
	a := open(t, h)
	if _, err := a.Get(ctx(t), "missing"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get of a missing name = %v, want ErrNotFound", err)
	}
	recs, err := a.List(ctx(t))
	if err != nil || len(recs) != 0 {
		t.Errorf("List of an empty store = %v, %v; want none", recs, err)
	}
	b := mustAcquire(t, a, "b", "h1", ttl)
	mustAcquire(t, a, "a", "h2", ttl)
	got, err := a.Get(ctx(t), "b")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Holder != "h1" || got.Token != b.Token || got.State() != "held" {
		t.Errorf("Get = %+v, want held by h1 with token %d", got, b.Token)
	}
	if got.Acquired.IsZero() || got.Expires.Before(got.Acquired) {
		t.Errorf("Get times: acquired %v, expires %v", got.Acquired, got.Expires)
	}
	recs, err = a.List(ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(recs) != 2 || recs[0].Name != "a" || recs[1].Name != "b" {
		t.Errorf("List = %+v, want records a and b in that order", recs)
	}
	if a.Describe() == "" {
		t.Error("Describe() is empty")
	}
}
