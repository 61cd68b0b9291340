package etcd

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		c, prefix := newPrefix(t)
		dsn := dsnFor(prefix, c.Endpoints()...)
		admin := c.Client(t)
		return leasetest.Harness{
			Open: func(t *testing.T) lease.Store {
				s, err := Open(testCtx(t), dsn)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			},
			Delete: func(t *testing.T, name string) {
				// Every key of the name, its last token included, as a
				// restore from an old backup might lose them.
				s := &Store{prefix: prefix}
				if _, err := admin.Delete(testCtx(t), s.keysOf(name).base, clientv3.WithPrefix()); err != nil {
					t.Fatalf("delete %q: %v", name, err)
				}
			},
		}
	})
}
