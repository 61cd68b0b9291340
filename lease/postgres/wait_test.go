package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
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

// current is what s reads of name now: the zero Record when absent.
func current(t *testing.T, s *Store, name string) lease.Record {
	t.Helper()
	rec, err := s.Get(testCtx(t), name)
	if err != nil && !errors.Is(err, lease.ErrNotFound) {
		t.Fatal(err)
	}
	return rec
}

// wantWoken fails unless Wait returns nil within limit.
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

// acquireSeen acquires name for the leader while follower waits on it, and
// returns once the follower was woken by that acquire and has read the new
// record: then no notification older than the follower's last read is
// still in flight, and the follower's next Wait blocks.
func acquireSeen(t *testing.T, leader, follower *Store, name string) lease.Record {
	t.Helper()
	ctx := testCtx(t)
	done := startWait(t, follower, name, current(t, follower, name), 30*time.Second)
	listening(t, follower, name)
	rec, err := leader.Acquire(ctx, name, "leader", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, 5*time.Second)
	if _, err := follower.Get(ctx, name); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestListenOffHasNoListener(t *testing.T) {
	dsn, _ := newSchema(t)
	s := openStore(t, withParam(dsn, paramListen, "off"))
	if s.listener != nil {
		t.Error("leaderrun_listen=off: the store has a listener")
	}
}

func TestRenewDoesNotWakeWaiter(t *testing.T) {
	dsn, _ := newSchema(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = time.Second
	start := time.Now()
	done := startWait(t, follower, "n", rec, timeout)
	listening(t, follower, "n")
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

func TestAcquireByNewHolderWakesWaiter(t *testing.T) {
	dsn, _ := newSchema(t)
	a, b := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	done := startWait(t, b, "n", lease.Record{}, 20*time.Second)
	listening(t, b, "n")
	if _, err := a.Acquire(ctx, "n", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, 5*time.Second)
}

// TestWaitSurvivesKilledListenConnection kills the LISTEN connection's
// server process, then releases: the waiter must still wake, by polling or
// by re-reading the row once it has reconnected.
func TestWaitSurvivesKilledListenConnection(t *testing.T) {
	dsn, _ := newSchema(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec := acquireSeen(t, leader, follower, "n")
	done := startWait(t, follower, "n", rec, 30*time.Second)
	pid := listening(t, follower, "n")
	epoch := follower.listener.Notice().Epoch

	var killed bool
	if err := adminConn(t).QueryRow(ctx, "SELECT pg_terminate_backend($1)", int(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}
	// Release only once the listener has seen its connection die, so that
	// the notification is sent while nobody listens (or after reconnect).
	for st := follower.listener.Notice(); st.Up && st.Epoch == epoch; st = follower.listener.Notice() {
		select {
		case <-st.Changed:
		case <-time.After(10 * time.Second):
			t.Fatal("listener did not notice its connection was terminated")
		}
	}
	released := time.Now()
	if err := leader.Release(ctx, "n", "leader", rec.Token); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, 5*time.Second)
	t.Logf("waiter woke %v after release with the LISTEN connection killed", time.Since(released))

	// The listener reconnects and delivers notifications again.
	next := acquireSeen(t, leader, follower, "n")
	done = startWait(t, follower, "n", next, 30*time.Second)
	if got := listening(t, follower, "n"); got == pid {
		t.Errorf("listener pid after reconnect = %d, the killed one", got)
	}
	if err := leader.Release(ctx, "n", "leader", next.Token); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, 5*time.Second)
}

// TestWaitRereadsAfterReconnect keeps the follower cut off from the server
// while the leader releases, so that the notification is lost and polling
// fails too; once the path heals, the waiter must find the change by
// re-reading the row.
func TestWaitRereadsAfterReconnect(t *testing.T) {
	dsn, _ := newSchema(t)
	proxy, err := tcpproxy.New(serverAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	leader := openStore(t, dsn)
	follower := openStore(t, viaProxy(t, dsn, proxy.Addr()))
	ctx := testCtx(t)
	rec := acquireSeen(t, leader, follower, "n")
	done := startWait(t, follower, "n", rec, 30*time.Second)
	listening(t, follower, "n")

	proxy.Reset()
	for st := follower.listener.Notice(); st.Up; st = follower.listener.Notice() {
		select {
		case <-st.Changed:
		case <-time.After(10 * time.Second):
			t.Fatal("listener did not notice the reset")
		}
	}
	if err := leader.Release(ctx, "n", "leader", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while the follower could not reach the server", err)
	case <-time.After(2 * pollInterval):
	}
	proxy.Pass()
	wantWoken(t, done, 10*time.Second)
}

// campaign acquires name for holder the way the election loop does: on
// *lease.HeldError it waits for the known expiry or a change, then tries
// again. It reports the acquired record and how many acquires it sent.
func campaign(ctx context.Context, s *Store, name, holder string) <-chan campaignResult {
	won := make(chan campaignResult, 1)
	go func() {
		var woke time.Time
		for attempts := 1; ctx.Err() == nil; attempts++ {
			rec, err := s.Acquire(ctx, name, holder, time.Minute)
			if err == nil {
				won <- campaignResult{rec, attempts, woke}
				return
			}
			wait, seen := 100*time.Millisecond, lease.Record{}
			var held *lease.HeldError
			if errors.As(err, &held) {
				wait, seen = held.Record.Remaining, held.Record
			}
			s.Wait(ctx, name, seen, wait)
			woke = time.Now()
		}
	}()
	return won
}

type campaignResult struct {
	rec      lease.Record
	attempts int
	woke     time.Time // when the last Wait returned
}

// TestHandOffLatency measures, over 20 hand-offs, release → the waiting
// follower's Wait returned and release → its successful acquire. The
// follower waits on a lease with a minute left, so only the release's
// notification can wake it in time.
func TestHandOffLatency(t *testing.T) {
	dsn, _ := newSchema(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	const runs, limit = 20, 5 * time.Second
	var wakes, lags []time.Duration
	for range runs {
		rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		won := campaign(ctx, follower, "relay", "follower")
		listening(t, follower, "relay")
		released := time.Now()
		if err := leader.Release(ctx, "relay", "leader", rec.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-won:
			lags = append(lags, time.Since(released))
			wakes = append(wakes, got.woke.Sub(released))
			// One refused attempt, perhaps one more after the leader's own
			// acquire notification, and the winning one: a follower that
			// spun instead of waiting would have sent many.
			if got.attempts > 3 {
				t.Errorf("follower sent %d acquires for one hand-off, want at most 3", got.attempts)
			}
			if err := follower.Release(ctx, "relay", "follower", got.rec.Token); err != nil {
				t.Fatal(err)
			}
		case <-time.After(limit):
			t.Fatalf("follower did not acquire within %v of the release (the lease had a minute left)", limit)
		}
	}
	slices.Sort(wakes)
	slices.Sort(lags)
	t.Logf("%d runs: release → waiter woken p50 %v, max %v; release → follower acquired p50 %v, max %v",
		runs, wakes[len(wakes)/2], wakes[len(wakes)-1], lags[len(lags)/2], lags[len(lags)-1])
}

func TestWaitEndsWhenStoreCloses(t *testing.T) {
	dsn, _ := newSchema(t)
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	done := startWait(t, s, "n", lease.Record{}, time.Minute)
	listening(t, s, "n")
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrClosed) {
			t.Errorf("Wait on a closed store = %v, want lease.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	if _, err := s.Get(context.Background(), "n"); err == nil || errorsIsLease(err) {
		t.Errorf("Get on a closed store = %v, want an error", err)
	}
}

func errorsIsLease(err error) bool {
	return err == lease.ErrNotFound || err == lease.ErrLost
}
