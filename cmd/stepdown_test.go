package cmd

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// blindToAcquire is a store whose Wait on a released name sleeps its
// whole timeout, as a MySQL Wait from a released record may: it learns of
// the next acquire only when it reads again.
type blindToAcquire struct {
	*leasetest.Memory
}

func (s blindToAcquire) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	if seen.Held() {
		return s.Memory.Wait(ctx, name, seen, timeout)
	}
	select {
	case <-time.After(timeout):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// step-down --wait reports a new leader within releasedPoll of its
// acquire even on a store that does not wake a waiter on a released name
// (it reported MariaDB's 277 ms p50 after the request, the new child
// running at 28.6 ms).
func TestAwaitNewLeaderReadsAReleasedNameSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &leasetest.Memory{}
		old, err := m.Acquire(ctx, "relay", "a", 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			rec lease.Record
			err error
			at  time.Duration
		}
		start := time.Now()
		done := make(chan result, 1)
		go func() {
			rec, err := awaitNewLeader(ctx, blindToAcquire{m}, old)
			done <- result{rec, err, time.Since(start)}
		}()
		time.Sleep(20 * time.Millisecond)
		if err := m.Release(ctx, "relay", "a", old.Token); err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * time.Millisecond)
		next, err := m.Acquire(ctx, "relay", "b", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.rec.Token != next.Token || r.rec.Holder != "b" {
			t.Fatalf("awaitNewLeader = %+v, %v; want b's tenure %d", r.rec, r.err, next.Token)
		}
		if limit := 27*time.Millisecond + releasedPoll; r.at > limit {
			t.Errorf("reported the new leader %v after the request, want by %v (b acquired at 27ms)", r.at, limit)
		}
	})
}
