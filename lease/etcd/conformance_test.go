package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"

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
			Delaying: func(t *testing.T) (lease.Store, func(string, time.Duration), func()) {
				// The holder is in the grant's transaction only: the
				// read and the lease grant before it do not name it.
				p, err := tcpproxy.New(c.Endpoints()[0])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				s, err := Open(testCtx(t), dsnFor(prefix, p.Addr()))
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s, p.DelayAfter, p.Pass
			},
		}
	})
}
