package mysql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// on virtual clocks: every session of a handle's statement pool is set
// to the test's time (SET timestamp, which UTC_TIMESTAMP(6) follows, in
// the procedures too) before each statement. The store's SQL is
// unchanged.
func TestModel(t *testing.T) {
	dsn, _ := newDatabase(t)
	db := admin(t, dsn)
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			clock := leasetest.NewVirtualClock()
			return leasetest.ModelStore{Store: openVirtual(t, dsn, clock.Read), Clock: clock, Plant: func(t *testing.T, rec lease.Record) {
				at := rec.Expires.UTC()
				exec(t, db, "INSERT INTO `"+leasesTable+"` (name, holder, token, acquired_at, renewed_at, expires_at, released, version) "+
					"VALUES (?, ?, ?, ?, ?, ?, ?, 1) ON DUPLICATE KEY UPDATE holder = VALUES(holder), token = VALUES(token), "+
					"acquired_at = VALUES(acquired_at), renewed_at = VALUES(renewed_at), expires_at = VALUES(expires_at), "+
					"released = VALUES(released), step_down = FALSE, successor = '', excluded_holder = '', reserved_until = NULL, "+
					"location = '', version = version + 1",
					rec.Name, rec.Holder, rec.Token, at, at, at, rec.Released)
				exec(t, db, "INSERT INTO `"+tokensTable+"` (name, token) VALUES (?, ?) ON DUPLICATE KEY UPDATE token = VALUES(token)",
					rec.Name, rec.Token)
			}}
		},
		SeesGranted: true,
	})
}

// openVirtual opens dsn with a statement pool whose sessions read now as
// the server's clock.
func openVirtual(t *testing.T, dsn string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	d, err := parseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(d.cfg, pool{maxOpen: maxConns, maxIdle: maxConns, ioTimeouts: true,
		wrap: func(c fullConn) fullConn { return &virtualSession{fullConn: c, now: now} }})
	if err != nil {
		t.Fatal(err)
	}
	s.db.Close()
	s.db = db
	return s
}

// virtualSession is a session whose clock is set to now before each
// statement (when now has moved since it was last set).
type virtualSession struct {
	fullConn
	now func() time.Time
	set time.Time
}

func (c *virtualSession) sync(ctx context.Context) error {
	t := c.now()
	if t.Equal(c.set) {
		return nil
	}
	if _, err := c.fullConn.ExecContext(ctx, fmt.Sprintf("SET timestamp = %d.%06d", t.Unix(), t.Nanosecond()/1000), nil); err != nil {
		return err
	}
	c.set = t
	return nil
}

func (c *virtualSession) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.sync(ctx); err != nil {
		return nil, err
	}
	return c.fullConn.ExecContext(ctx, q, args)
}

func (c *virtualSession) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.sync(ctx); err != nil {
		return nil, err
	}
	return c.fullConn.QueryContext(ctx, q, args)
}

func (c *virtualSession) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if err := c.sync(ctx); err != nil {
		return nil, err
	}
	return c.fullConn.PrepareContext(ctx, q)
}

func (c *virtualSession) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.sync(ctx); err != nil {
		return nil, err
	}
	return c.fullConn.BeginTx(ctx, opts)
}
