package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
)

// newProxy starts a proxy to the shared server and returns it with two DSNs
// under a prefix of their own: one that connects through the proxy, and
// one that connects directly.
func newProxy(t *testing.T) (p *tcpproxy.Proxy, via, direct string) {
	t.Helper()
	dsn, _ := newPrefix(t)
	addr, err := redistest.Addr(serverURL(t))
	if err != nil {
		t.Skip(err)
	}
	p, err = tcpproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via, err = redistest.ViaAddr(dsn, p.Addr())
	if err != nil {
		t.Skip(err)
	}
	return p, via, dsn
}

// renew renews with a per-attempt timeout and reports how long it took.
func renew(s *Store, rec lease.Record, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err := s.Renew(ctx, rec.Name, rec.Holder, rec.Token, time.Minute)
	return time.Since(start), err
}

func TestRenewThroughPartition(t *testing.T) {
	proxy, dsn, _ := newProxy(t)
	s := openStore(t, dsn)
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

	// Without a deadline of its own, the read timeout ends it.
	took, err = renew(s, rec, time.Hour)
	if err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew without a deadline through a blackhole = %v, want a timeout", err)
	}
	t.Logf("blackholed Renew without a deadline failed after %v: %v", took, err)

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
