package postgres

import (
	"context"
	"errors"
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

func TestRenewThroughPartition(t *testing.T) {
	dsn, _ := newSchema(t)
	proxy := newProxy(t)
	s := openStore(t, viaProxy(t, dsn, proxy.Addr()))
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

// TestMultiHostFailover points a multi-host DSN at two proxies of the same
// server; when the first stops answering, the store carries on through the
// second after at most one failed statement.
func TestMultiHostFailover(t *testing.T) {
	dsn, _ := newSchema(t)
	first, second := newProxy(t), newProxy(t)
	s := openStore(t, withParam(viaProxy(t, dsn, first.Addr(), second.Addr()), "target_session_attrs", "read-write"))
	rec, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first.Reset()
	var errs []error
	for range 2 {
		if _, err = renew(s, rec, 5*time.Second); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if err != nil {
		t.Fatalf("Renew after the first host failed: %v", errors.Join(errs...))
	}
	t.Logf("failed statements before the second host answered: %d", len(errs))
}
