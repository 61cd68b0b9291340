package mysql

import (
	"testing"

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
		}
	})
}
