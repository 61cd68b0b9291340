package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
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
	// withID reads each new session's CONNECTION_ID() once, for sessionID.
	withID bool
	// wrap, set by tests only, wraps each new session.
	wrap func(fullConn) fullConn
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
	cfg.DialFunc = dialRecorded(tcpdial.New().DialContext)
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
	db := sql.OpenDB(initConnector{Connector: conn, withID: p.withID, wrap: p.wrap})
	db.SetMaxOpenConns(p.maxOpen)
	db.SetMaxIdleConns(p.maxIdle)
	db.SetConnMaxIdleTime(connMaxIdle)
	return db, nil
}

// initConnector runs sessionInit on every connection it opens and, with
// withID, reads its CONNECTION_ID().
type initConnector struct {
	driver.Connector
	withID bool
	wrap   func(fullConn) fullConn
}

func (c initConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := connectGuarded(ctx, c.Connector)
	if err != nil {
		return nil, err
	}
	if _, err := conn.(driver.ExecerContext).ExecContext(ctx, sessionInit, nil); err != nil {
		conn.Close()
		return nil, err
	}
	full, ok := conn.(fullConn)
	if ok && c.wrap != nil {
		full = c.wrap(full)
		conn = full
	}
	if !c.withID || !ok {
		return conn, nil
	}
	id, err := connectionID(ctx, full)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return idConn{full, id}, nil
}

// fullConn is what database/sql uses of the driver's connections.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.NamedValueChecker
	driver.SessionResetter
	driver.Validator
}

// idConn is a driver connection that knows its session's CONNECTION_ID(),
// so that a session about to block in GET_LOCK can be interrupted (KILL
// QUERY) without first asking the server which it is.
type idConn struct {
	fullConn
	id int64
}

func connectionID(ctx context.Context, conn driver.QueryerContext) (int64, error) {
	rows, err := conn.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return 0, err
	}
	switch id := v[0].(type) {
	case int64:
		return id, nil
	case []byte:
		return strconv.ParseInt(string(id), 10, 64)
	}
	return 0, fmt.Errorf("CONNECTION_ID() returned %T", v[0])
}

// sessionID is the CONNECTION_ID() of conn's session, from a pool opened
// withID, or 0.
func sessionID(conn *sql.Conn) int64 {
	var id int64
	conn.Raw(func(dc any) error {
		if c, ok := dc.(idConn); ok {
			id = c.id
		}
		return nil
	})
	return id
}

// discard closes conn's session instead of returning it to its pool:
// database/sql drops a connection whose Raw callback reports it bad.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// The driver parses the server's handshake by offsets it does not check
// against the packet's length: a short or malformed handshake (a server
// that is not MySQL, or a broken one) panicked it (slice bounds out of
// range) in whichever goroutine opened the connection, database/sql's
// own among them. connectGuarded turns that panic into an error and
// closes the connection the driver dialed for it.

// dialedKey is the context key under which connectGuarded learns of the
// connection dialRecorded dialed.
type dialedKey struct{}

// dialRecorded wraps dial to record the connection it returns in the
// context's *net.Conn, if connectGuarded put one there.
func dialRecorded(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if p, ok := ctx.Value(dialedKey{}).(*net.Conn); ok && err == nil {
			*p = conn
		}
		return conn, err
	}
}

// ErrMalformedHandshake is returned for a server whose handshake the
// driver could not parse.
var ErrMalformedHandshake = errors.New("the server's handshake is malformed: not a MySQL server, or a broken one")

// connectGuarded is c.Connect, with a panic of the driver's turned into
// an error wrapping ErrMalformedHandshake.
func connectGuarded(ctx context.Context, c driver.Connector) (conn driver.Conn, err error) {
	var dialed net.Conn
	defer func() {
		if r := recover(); r != nil {
			if dialed != nil {
				dialed.Close()
			}
			conn, err = nil, fmt.Errorf("%w (the driver failed: %v)", ErrMalformedHandshake, r)
		}
	}()
	return c.Connect(context.WithValue(ctx, dialedKey{}, &dialed))
}
