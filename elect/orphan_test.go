package elect_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// lateAcquire carries out the next Acquire of name once armed, and answers
// it only after the caller's context ended, as a reply that came too late.
type lateAcquire struct {
	*leasetest.Memory
	name  string
	armed atomic.Bool
}

func (s *lateAcquire) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if name != s.name || !s.armed.CompareAndSwap(true, false) {
		return s.Memory.Acquire(ctx, name, holder, ttl)
	}
	s.Memory.Acquire(context.WithoutCancel(ctx), name, holder, ttl)
	<-ctx.Done()
	return lease.Record{}, ctx.Err()
}

// TestCampaignLeavesItsIdentitysOtherTenure: a record naming the
// campaigning holder's identity under a token it does not know, read with
// no Acquire of unknown outcome behind it, is another process's (one given
// the same --identity): the campaign waits for it as for any holder.
func TestCampaignLeavesItsIdentitysOtherTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		other, err := m.Acquire(context.Background(), "relay", "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
		defer cancel()
		if _, err := elector(m.Handle(), "a", newFakeClock()).Campaign(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Campaign = %v, want DeadlineExceeded (waiting for the other tenure)", err)
		}
		rec, err := m.Get(context.Background(), "relay")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.HeldBy("a", other.Token) {
			t.Errorf("record = %+v, want still held with token %d", rec, other.Token)
		}
	})
}

// TestCampaignWaitsOutItsAbandonedTenure: a tenure this elector left to
// expire (Abandon, for --hold-at-least) is one it knows, and stays until
// it expires, also after an Acquire of unknown outcome.
func TestCampaignWaitsOutItsAbandonedTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		e := elector(m, "a", newFakeClock())
		ten := campaign(t, e)
		ten.Abandon()
		m.SetFailure(errors.New("connection reset by peer"))
		go func() {
			time.Sleep(3 * interval)
			m.SetFailure(nil)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
		defer cancel()
		if _, err := e.Campaign(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Campaign = %v, want DeadlineExceeded (waiting for the abandoned tenure)", err)
		}
		rec, err := m.Get(context.Background(), "relay")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.HeldBy("a", ten.Token()) {
			t.Errorf("record = %+v, want the abandoned tenure %d still held", rec, ten.Token())
		}
	})
}

// TestOwnerReleasesALostPartitionGrant: a partition whose acquire the
// store carried out but answered too late is released and acquired again
// long before that grant would expire.
func TestOwnerReleasesALostPartitionGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		m := &leasetest.Memory{}
		s := &lateAcquire{Memory: m.Handle(), name: lease.PartitionKey("ingest", 0)}
		s.armed.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		o := &elect.Owner{Store: s, Group: "ingest", Partitions: n, Member: "a",
			LeaseDuration: ownerTTL, RenewDeadline: ownerG, RetryPeriod: ownerR, ReconcileInterval: reconcileI,
			Clock: func() time.Duration { return time.Since(start) },
			Started: func(p int, ten *elect.Tenure) {
				go func() {
					<-ten.Context().Done()
					ten.Release(context.Background())
				}()
			}}
		done := make(chan error, 1)
		go func() { done <- o.Run(ctx) }()
		time.Sleep(ownerTTL * 2 / 3)
		if held := o.Held(); !slices.Equal(held, []int{0, 1, 2, 3}) {
			t.Errorf("held %v %v after the lost grant of partition 0 (it expires after %v), want all %d",
				held, ownerTTL*2/3, ownerTTL, n)
		}
		if s.armed.Load() {
			t.Error("the late acquire never happened")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
