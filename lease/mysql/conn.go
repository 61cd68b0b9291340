package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leaderrun/leaderrun/internal/tcpdial"
)

// Sizes of the store's connection pools. Every statement is short, so a
// few connections serve many concurrent callers; wake-up sessions are
// capped, and Waits beyond the cap poll (see Wait).
const (
	maxConns       = 8
	maxLockWaiters = 8
	connMaxIdle    = 5 * time.Minute
)

// Session settings of every connection, sent once when it is opened.
//
// time_zone makes DATETIME values unambiguous: every one the store writes
// or compares is UTC (the statements use UTC_TIMESTAMP(6), which does not
// depend on the session's zone; the setting also makes NOW() agree).
// innodb_lock_wait_timeout bounds how long a takeover waits for a
// transaction that holds fence (see the package documentation), and
// lock_wait_timeout how long a statement waits for a metadata lock (an
// administrator's ALTER TABLE).
var sessionParams = map[string]string{
	"time_zone":                "'+00:00'",
	"innodb_lock_wait_timeout": "5",
	"lock_wait_timeout":        "10",
}

// lockSessionParams are added for the session that holds the tenures'
// wake-up locks: it is idle for a whole tenure, and the server must not
// close it for that (its death is the crash wake-up; a ping every
// lockPingInterval notices a broken one).
var lockSessionParams = map[string]string{
	"wait_timeout": "31536000",
}

// sessionInit is run on every new connection: READ COMMITTED, so that each
// statement reads the latest committed rows, an UPDATE whose condition
// the committed row fails does not wait for another transaction's lock
// (semi-consistent read), and a lookup of an absent key takes no gap lock.
const sessionInit = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

// pool describes one of a store's connection pools.
type pool struct {
	maxOpen, maxIdle int               // 0: unlimited open, none idle
	params           map[string]string // session settings beyond sessionParams
	// ioTimeouts keeps the DSN's readTimeout and writeTimeout; sessions
	// that block in GET_LOCK for as long as a Wait lasts drop them.
	ioTimeouts bool
}

// openDB returns a connection pool for cfg with the session settings,
// dialing through tcpdial (keepalive and TCP_USER_TIMEOUT). Its error is
// the configuration's, the same for every pool of one cfg.
func openDB(base *mysqldriver.Config, p pool) (*sql.DB, error) {
	cfg := base.Clone()
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = true
	cfg.MultiStatements = false
	cfg.CheckConnLiveness = true
	cfg.Logger = &mysqldriver.NopLogger{}
	cfg.DialFunc = tcpdial.New().DialContext
	if !p.ioTimeouts {
		cfg.ReadTimeout, cfg.WriteTimeout = 0, 0
	}
	cfg.Params = map[string]string{}
	maps.Copy(cfg.Params, sessionParams)
	maps.Copy(cfg.Params, p.params)
	conn, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("DSN: %w", err)
	}
	db := sql.OpenDB(initConnector{conn})
	db.SetMaxOpenConns(p.maxOpen)
	db.SetMaxIdleConns(p.maxIdle)
	db.SetConnMaxIdleTime(connMaxIdle)
	return db, nil
}

// initConnector runs sessionInit on every connection it opens.
type initConnector struct{ driver.Connector }

func (c initConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, sessionInit, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// discard closes conn's session instead of returning it to its pool:
// database/sql drops a connection whose Raw callback reports it bad.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
