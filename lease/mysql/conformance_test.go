package mysql

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestConformance(t *testing.T) {
	serverDSN(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		dsn, _ := newDatabase(t)
		return leasetest.Harness{
			Open: func(t *testing.T) lease.Store {
				s, err := Open(testCtx(t), dsn)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			},
			Delete: func(t *testing.T, name string) {
				exec(t, admin(t, dsn), "DELETE FROM `"+leasesTable+"` WHERE name = ?", name)
			},
			Delaying: func(t *testing.T) (lease.Store, func(string, time.Duration), func()) {
				// A grant is a transaction after a CALL that names the
				// holder too: its COMMIT (COM_QUERY, 0x03) is the write
				// whose reply is to come late. The driver's COMMIT
				// does not heed the call's context, only readTimeout,
				// which is shorter than the suite's delay.
				p := newProxy(t)
				s, err := Open(testCtx(t), mysqltest.WithParam(viaHost(t, dsn, p.Addr()), "readTimeout", "2s"))
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s, func(_ string, d time.Duration) { p.DelayAfter("\x03COMMIT", d) }, p.Pass
			},
		}
	})
}
