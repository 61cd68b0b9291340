package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func harness(t *testing.T, dsn, schema string) leasetest.Harness {
	return leasetest.Harness{
		Open: func(t *testing.T) lease.Store {
			s, err := Open(testCtx(t), dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		Delete: func(t *testing.T, name string) {
			exec(t, adminConn(t), "DELETE FROM "+pgx.Identifier{schema, tableName}.Sanitize()+" WHERE name = $1", name)
		},
		Delaying: func(t *testing.T) (lease.Store, func(string, time.Duration), func()) {
			// A grant is one statement, sent in one write with its
			// arguments, the holder among them.
			p := newProxy(t)
			s, err := Open(testCtx(t), viaProxy(t, dsn, p.Addr()))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s, p.DelayAfter, p.Pass
		},
	}
}

func TestConformance(t *testing.T) {
	serverDSN(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		dsn, schema := newSchema(t)
		h := harness(t, dsn, schema)
		h.Listening = func(t *testing.T, s lease.Store, name string) { listening(t, s.(*Store), name) }
		return h
	})
}

func TestConformanceListenOff(t *testing.T) {
	serverDSN(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		dsn, schema := newSchema(t)
		return harness(t, withParam(dsn, paramListen, "off"), schema)
	})
}
