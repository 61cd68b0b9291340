package mysql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/tcpproxy"
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
