// Package mysqltest points tests at a real MySQL or MariaDB server and
// gives each test its own database.
//
// The server is the DSN in LEADERRUN_TEST_MYSQL, by default the local one
// (mysql://root@127.0.0.1:3306/test). When it cannot be reached, tests
// skip with a message naming that variable — except in CI (CI set), where
// they fail: CI must not pass by skipping.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvDSN names the variable that points the tests at a server.
const EnvDSN = "LEADERRUN_TEST_MYSQL"

// DefaultDSN is the server tests use when EnvDSN is unset.
const DefaultDSN = "mysql://root@127.0.0.1:3306/test"

var (
	reachOnce sync.Once
	reachErr  error
)

// DSN returns the test server's DSN, and an error that says how to point
// the tests at a server when it cannot be reached.
func DSN() (string, error) {
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		dsn = DefaultDSN
	}
	reachOnce.Do(func() {
		db, err := Admin(dsn)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = db.PingContext(ctx)
			db.Close()
		}
		if err != nil {
			reachErr = fmt.Errorf("MySQL for tests is unreachable (%v); set %s to the mysql:// DSN of a server to test against (a user that may create databases)", err, EnvDSN)
		}
	})
	return dsn, reachErr
}

// Require returns the test server's DSN, or skips tb (fails it in CI).
func Require(tb testing.TB) string {
	tb.Helper()
	dsn, err := DSN()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return dsn
}

// Config converts a mysql:// URL DSN (user, password, host, port, database
// and the driver's parameters) to the driver's configuration.
func Config(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return nil, fmt.Errorf("%s is not a mysql:// URL", EnvDSN)
	}
	cfg, err := mysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, err
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(u.Hostname(), port)
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.ParseTime = true
	return cfg, nil
}

// Admin opens a connection pool to dsn's server and database, as dsn's
// user.
func Admin(dsn string) (*sql.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// NewDatabase creates a database no other test uses, drops it when tb
// ends, and returns the server DSN that names it.
func NewDatabase(tb testing.TB) (dsn, db string) {
	tb.Helper()
	return NewDatabaseOn(tb, Require(tb))
}

// NewDatabaseOn is NewDatabase on the server of the DSN base.
func NewDatabaseOn(tb testing.TB, base string) (dsn, db string) {
	tb.Helper()
	db = RandomName()
	admin, err := Admin(base)
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+db+"`"); err != nil {
		tb.Fatalf("create database %s: %v", db, err)
	}
	tb.Cleanup(func() {
		if err := DropDatabase(base, db); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return WithDatabase(base, db), db
}

// RandomName returns a database or user name no other test run uses.
func RandomName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "lrtest_" + hex.EncodeToString(b)
}

// DropDatabase drops db and everything in it.
func DropDatabase(dsn, db string) error {
	admin, err := Admin(dsn)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
		return fmt.Errorf("drop database %s: %w", db, err)
	}
	return nil
}

// WithDatabase returns dsn naming database db instead of its own.
func WithDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

// WithParam adds a query parameter to a URL DSN.
func WithParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
}

// ViaHost rewrites a URL DSN to connect to addr (host:port) instead of its
// own host.
func ViaHost(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL; cannot rewrite its host", EnvDSN)
	}
	u.Host = addr
	return u.String(), nil
}

// Addr returns the host:port of a DSN's server.
func Addr(dsn string) (string, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return "", err
	}
	return cfg.Addr, nil
}
