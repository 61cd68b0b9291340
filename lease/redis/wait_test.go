package redis

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// startWait runs s.Wait from seen in the background and reports when it
// returns.
func startWait(t *testing.T, s *Store, name string, seen lease.Record, timeout time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Wait(testCtx(t), name, seen, timeout) }()
	return done
}

// wantWoken fails unless Wait returns nil within limit, and returns how
// long it took.
func wantWoken(t *testing.T, done <-chan error, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("waiter not woken within %v", limit)
	}
	return 0
}

func TestRenewDoesNotWakeWaiter(t *testing.T) {
	dsn, _ := newPrefix(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	start := time.Now()
	done := startWait(t, follower, "n", rec, timeout)
	subscribed(t, follower, "n")
	for range 3 {
		if _, err := leader.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	wantWoken(t, done, 10*time.Second)
	if got := time.Since(start); got < timeout-50*time.Millisecond {
		t.Errorf("Wait returned after %v with only renewals, want the full %v", got, timeout)
	}
}

// TestWaitRereadsAfterResubscribe cuts a waiting follower's connections
// (its subscription among them) and releases while they are down, so that
// the release's message is lost: the follower must still wake once its
// subscription is back, by reading the record again.
func TestWaitRereadsAfterResubscribe(t *testing.T) {
	proxy, viaProxy, direct := newProxy(t)
	leader, follower := openStore(t, direct), openStore(t, viaProxy)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "leader", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := startWait(t, follower, "n", rec, 30*time.Second)
	epoch := subscribed(t, follower, "n")

	proxy.Reset()
	for st := follower.sub.Notice(); st.Up; st = follower.sub.Notice() {
		select {
		case <-st.Changed:
		case <-time.After(10 * time.Second):
			t.Fatal("the subscriber did not notice its connection was reset")
		}
	}
	if err := leader.Release(ctx, "n", "leader", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while every connection of the follower was being reset", err)
	default:
	}
	healed := time.Now()
	proxy.Pass()
	wantWoken(t, done, 10*time.Second)
	t.Logf("waiter woke %v after the proxy passed again", time.Since(healed).Round(time.Millisecond))
	for st := follower.sub.Notice(); !st.Up || st.Epoch <= epoch; st = follower.sub.Notice() {
		select {
		case <-st.Changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("subscription after the reset: up %v, epoch %d; want up with an epoch > %d", st.Up, st.Epoch, epoch)
		}
	}
	cur, err := follower.Get(ctx, "n")
	if err != nil || !cur.Released {
		t.Errorf("follower reads %+v, %v; want the released record", cur, err)
	}
}

// TestBlackholedSubscriptionIsNoticed blackholes a follower's
// subscription: within two health intervals it must be declared down (so
// that waiters poll), and come back up once the network heals.
func TestBlackholedSubscriptionIsNoticed(t *testing.T) {
	proxy, dsn, _ := newProxy(t)
	follower := openStore(t, dsn)
	done := startWait(t, follower, "n", lease.Record{}, time.Minute)
	epoch := subscribed(t, follower, "n")

	cut := time.Now()
	proxy.Blackhole()
	for st := follower.sub.Notice(); st.Up; st = follower.sub.Notice() {
		select {
		case <-st.Changed:
		case <-time.After(2*healthInterval + 5*time.Second):
			t.Fatal("the subscriber did not notice the blackhole")
		}
	}
	t.Logf("blackholed subscription declared down after %v", time.Since(cut).Round(time.Millisecond))
	proxy.Pass()
	if got := subscribed(t, follower, "n"); got <= epoch {
		t.Errorf("epoch after the blackhole = %d, want > %d", got, epoch)
	}
	select {
	case err := <-done:
		t.Errorf("Wait on an unchanged name returned %v", err)
	default:
	}
}
