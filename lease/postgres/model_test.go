package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// on virtual clocks: a handle's sessions find now() and clock_timestamp()
// in a schema of the test's first on their search_path, before
// pg_catalog, and those read the time the test sets. The store's SQL is
// unchanged.
func TestModel(t *testing.T) {
	dsn, schema := newSchema(t)
	table := pgx.Identifier{schema, tableName}.Sanitize()
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			clock := newSQLClock(t)
			s, err := Open(testCtx(t), withParam(dsn, "search_path", clock.schema+",pg_catalog"))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return leasetest.ModelStore{Store: s, Clock: clock, Plant: func(t *testing.T, rec lease.Record) {
				exec(t, clock.conn, `INSERT INTO `+table+` (name, holder, token, acquired_at, renewed_at, expires_at, released)
					VALUES ($1, $2, $3, $4, $4, $4, $5)
					ON CONFLICT (name) DO UPDATE SET holder = $2, token = $3, acquired_at = $4, renewed_at = $4,
						expires_at = $4, released = $5, step_down = false, successor = '', excluded_holder = '',
						reserved_until = NULL, location = ''`,
					rec.Name, rec.Holder, rec.Token, rec.Expires, rec.Released)
			}}
		},
		SeesGranted: true,
		KeepsFresh:  true,
		Parallel:    4,
	})
}

// sqlClock is a virtual clock that PostgreSQL sessions read as now() and
// clock_timestamp() from a schema of its own.
type sqlClock struct {
	*leasetest.VirtualClock
	schema string
	conn   *pgx.Conn
}

func newSQLClock(t *testing.T) *sqlClock {
	t.Helper()
	c := &sqlClock{VirtualClock: leasetest.NewVirtualClock(), schema: pgtest.RandomSchema() + "_clock", conn: adminConn(t)}
	t.Cleanup(func() {
		if err := pgtest.DropSchema(serverDSN(t), c.schema); err != nil {
			t.Error(err)
		}
	})
	s := pgx.Identifier{c.schema}.Sanitize()
	for _, q := range []string{
		`CREATE SCHEMA ` + s,
		`CREATE TABLE ` + s + `.clock (t timestamptz NOT NULL)`,
		fmt.Sprintf(`INSERT INTO %s.clock VALUES ('%s')`, s, c.Read().UTC().Format(time.RFC3339Nano)),
		`CREATE FUNCTION ` + s + `.now() RETURNS timestamptz LANGUAGE sql STABLE AS 'SELECT t FROM ` + s + `.clock'`,
		`CREATE FUNCTION ` + s + `.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS 'SELECT t FROM ` + s + `.clock'`,
	} {
		exec(t, c.conn, q)
	}
	return c
}

func (c *sqlClock) Advance(ctx context.Context, d time.Duration) {
	c.VirtualClock.Advance(ctx, d)
	if _, err := c.conn.Exec(ctx, `UPDATE `+pgx.Identifier{c.schema}.Sanitize()+`.clock SET t = $1`, c.Read()); err != nil {
		panic(fmt.Sprintf("set the virtual clock: %v", err))
	}
}
