package etcd

import (
	"context"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// in real time: etcd ends a lease by its own countdown, in whole seconds,
// which no test can set. The store's clock is the replica's (tokens,
// candidates, members, reservations), read before and after each
// operation; a lease may end up to Late after the rules say (etcd's
// revocation delay), and a boundary that falls between the two readings
// lets either outcome pass. Every duration is one second, etcd's unit.
func TestModel(t *testing.T) {
	c, prefix := newPrefix(t)
	dsn := dsnFor(prefix, c.Endpoints()...)
	admin := c.Client(t)
	clock := leasetest.RealClock{Read: func(context.Context) (time.Time, error) { return time.Now(), nil }}
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			s, err := Open(testCtx(t), dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return leasetest.ModelStore{Store: s, Clock: clock, Plant: func(t *testing.T, rec lease.Record) {
				// The record without a lease key: expired, or released
				// when the released key names its token.
				k := s.keysOf(rec.Name)
				ops := []clientv3.Op{
					clientv3.OpPut(k.record, recordValue{Holder: rec.Holder, Token: rec.Token, AcquiredMs: rec.Expires.Add(-time.Second).UnixMilli()}.encode()),
					clientv3.OpDelete(k.lease), clientv3.OpDelete(k.released),
				}
				if rec.Released {
					ops[2] = clientv3.OpPut(k.released, strconv.FormatInt(rec.Token, 10))
				}
				if _, err := admin.Txn(testCtx(t)).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}}
		},
		TTLs:    []time.Duration{time.Second},
		Windows: []time.Duration{300 * time.Millisecond, time.Second},
		Steps:   []time.Duration{time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond, time.Second},
		Late:    1500 * time.Millisecond,
		// A member's partitions share its etcd lease once a round
		// claimed them.
		ReleasesUnclaimed: true,
		// An Acquire of a name the handle saw held records its holder
		// as a candidate first, in the transaction that reads the keys.
		SeesGranted: true,
		// A refusal leaves a Fresh candidacy as it is (probe, refuse).
		KeepsFresh: true,
		Sequences:  200,
		Parallel:   32,
		Length:     20,
	})
}
