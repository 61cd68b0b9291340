package cmd

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// blindWaits is a store whose Wait sleeps its whole timeout: as a MySQL
// Wait from a released record may, or a PostgreSQL Wait whose LISTEN
// connection is still being opened when the name changes hands. It learns
// of a change only when it reads again.
type blindWaits struct {
	*leasetest.Memory
}

func (blindWaits) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	select {
	case <-time.After(timeout):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// step-down --wait reports a new leader within handOverPoll of its
// acquire even on a store whose Waits do not wake it: MariaDB's reported
// a new leader 277 ms p50 after the request with the new child running at
// 28.6 ms, and PostgreSQL's --wait returned 15 ms after the new child ran
// (the first Wait's LISTEN connection was still starting).
func TestAwaitNewLeaderReadsTheNameSoon(t *testing.T) {
	for _, tc := range []struct {
		name string
		next func(m *leasetest.Memory, old lease.Record) (lease.Record, error)
	}{
		{"released, then acquired", func(m *leasetest.Memory, old lease.Record) (lease.Record, error) {
			if err := m.Release(context.Background(), "relay", "a", old.Token); err != nil {
				return lease.Record{}, err
			}
			time.Sleep(7 * time.Millisecond)
			return m.Acquire(context.Background(), "relay", "b", time.Hour)
		}},
		{"taken over at once (the stopping word)", func(m *leasetest.Memory, old lease.Record) (lease.Record, error) {
			time.Sleep(7 * time.Millisecond)
			return m.Seize(context.Background(), "relay", "b", old, time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
					rec, err := awaitNewLeader(ctx, io.Discard, blindWaits{m}, old)
					done <- result{rec, err, time.Since(start)}
				}()
				time.Sleep(20 * time.Millisecond)
				next, err := tc.next(m, old)
				if err != nil {
					t.Fatal(err)
				}
				r := <-done
				if r.err != nil || r.rec.Token != next.Token || r.rec.Holder != "b" {
					t.Fatalf("awaitNewLeader = %+v, %v; want b's tenure %d", r.rec, r.err, next.Token)
				}
				if limit := 27*time.Millisecond + handOverPoll; r.at > limit {
					t.Errorf("reported the new leader %v after the request, want by %v (b took the name at 27ms)", r.at, limit)
				}
			})
		})
	}
}
