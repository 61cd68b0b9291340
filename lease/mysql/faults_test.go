package mysql

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
)

func newProxy(t *testing.T) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New(serverAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// renew renews with a per-attempt timeout and reports how long it took.
func renew(s *Store, rec lease.Record, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := s.Renew(ctx, rec.Name, rec.Holder, rec.Token, time.Minute)
	return time.Since(start), err
}

// TestRenewThroughPartition renews through a proxy that blackholes, then
// resets the connections: a renewal whose outcome is unknown is an error,
// never ErrLost and never success, and the store recovers when the path
// heals.
func TestRenewThroughPartition(t *testing.T) {
	dsn, _ := newDatabase(t)
	proxy := newProxy(t)
	s := openStore(t, viaHost(t, dsn, proxy.Addr()))
	rec, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	proxy.Blackhole()
	took, err := renew(s, rec, time.Second)
	if err == nil {
		t.Fatal("Renew through a blackhole succeeded")
	}
	if errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew through a blackhole = %v, want an error other than ErrLost (the outcome is unknown)", err)
	}
	if took > 2*time.Second {
		t.Errorf("Renew with a 1s timeout through a blackhole took %v", took)
	}
	t.Logf("blackholed Renew failed after %v: %v", took, err)

	proxy.Pass()
	if _, err := renew(s, rec, 5*time.Second); err != nil {
		t.Fatalf("Renew after the blackhole healed: %v", err)
	}

	proxy.Reset()
	took, err = renew(s, rec, 5*time.Second)
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew through a reset connection = %v, want a connection error", err)
	}
	t.Logf("reset Renew failed after %v: %v", took, err)

	proxy.Pass()
	if _, err := renew(s, rec, 5*time.Second); err != nil {
		t.Fatalf("Renew after the reset healed: %v", err)
	}
}

// TestWaitThroughPartition: a follower cut off from the server while the
// leader releases finds the release once the path heals, by its poll.
func TestWaitThroughPartition(t *testing.T) {
	dsn, _ := newDatabase(t)
	proxy := newProxy(t)
	leader := openStore(t, dsn)
	follower := openStore(t, viaHost(t, dsn, proxy.Addr()))
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := startWait(t, follower, "n", rec, 30*time.Second)
	waitBlocked(t, follower, admin(t, dsn), 1)
	proxy.Reset()
	if err := leader.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		// The reset ended the blocked session; a waiter may return then
		// (a spurious wake-up), but not with an error.
		if err != nil {
			t.Fatalf("Wait through a reset: %v", err)
		}
		return
	case <-time.After(2 * pollInterval):
	}
	proxy.Pass()
	wantWoken(t, done, 10*time.Second)
}

// TestCloseThroughPartition closes a store cut off from the server (a
// blackhole, so that nothing fails fast) as a replica of 8 partitions
// shuts down: it holds 8 tenures, 12 Waits are in progress (its own on
// those tenures, with their bells, and 4 on another store's; 8 block in
// GET_LOCK, the others poll) and a Release of each tenure is in flight.
// Close must return in bounded time (its KILL QUERY and every statement
// on the lock session have lockOpTimeout), and every Wait with ErrClosed.
func TestCloseThroughPartition(t *testing.T) {
	dsn, _ := newDatabase(t)
	proxy := newProxy(t)
	other := openStore(t, dsn)
	s, err := Open(testCtx(t), viaHost(t, dsn, proxy.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var (
		held  []lease.Record
		waits []<-chan error
	)
	for i := range 8 {
		rec, err := s.Acquire(ctx, fmt.Sprintf("p%d", i), "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rec)
		waits = append(waits, startWait(t, s, rec.Name, rec, time.Minute))
	}
	for i := range 4 {
		name := fmt.Sprintf("o%d", i)
		rec, err := other.Acquire(ctx, name, "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, startWait(t, s, name, rec, time.Minute))
	}
	waitBlocked(t, s, admin(t, dsn), maxLockWaiters) // the other 4 poll

	proxy.Blackhole()
	for _, rec := range held {
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s.Release(rctx, rec.Name, rec.Holder, rec.Token)
		}()
	}
	start := time.Now()
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	const limit = 2*lockOpTimeout + time.Second
	select {
	case <-closed:
		t.Logf("Close through a blackhole took %v", time.Since(start))
	case <-time.After(limit):
		t.Fatalf("Close through a blackhole did not return within %v", limit)
	}
	for _, done := range waits {
		select {
		case err := <-done:
			if !errors.Is(err, lease.ErrClosed) {
				t.Errorf("Wait ended by Close = %v, want ErrClosed", err)
			}
		case <-time.After(time.Second):
			t.Fatal("a Wait did not return after Close")
		}
	}
}
