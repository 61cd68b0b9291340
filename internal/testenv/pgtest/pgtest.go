// Package pgtest points tests at a real PostgreSQL server and gives each
// test its own schema.
//
// The server is the DSN in LEADERRUN_TEST_POSTGRES, by default the local
// one. When it cannot be reached, tests skip with a message naming that
// variable — except in CI (CI set), where they fail: CI must not pass by
// skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// EnvDSN names the variable that points the tests at a server.
const EnvDSN = "LEADERRUN_TEST_POSTGRES"

// DefaultDSN is the server tests use when EnvDSN is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			reachErr = fmt.Errorf("PostgreSQL for tests is unreachable (%v); set %s to the DSN of a server to test against", err, EnvDSN)
			return
		}
		conn.Close(ctx)
	})
	return dsn, reachErr
}

// Require returns the test server's DSN, or skips tb (fails it in CI).
func Require(tb testing.TB) string {
	tb.Helper()
	dsn, err := DSN()
	if err != nil {
		citest.Missing(tb, "%v", err)
	}
	return dsn
}

// NewSchema names a fresh schema, drops it when tb ends, and returns the
// server DSN that makes leaderrun use it.
func NewSchema(tb testing.TB) (dsn, schema string) {
	tb.Helper()
	base := Require(tb)
	schema = RandomSchema()
	tb.Cleanup(func() {
		if err := DropSchema(base, schema); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return WithParam(base, "leaderrun_schema", schema), schema
}

// RandomSchema returns a schema name no other test run uses.
func RandomSchema() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "lrtest_" + hex.EncodeToString(b)
}

// DropSchema drops schema and everything in it.
func DropSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// WithParam adds a query parameter to a URL DSN.
func WithParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + Escape(key) + "=" + Escape(value)
}

// Escape %-encodes s for a DSN query, spaces as %20: libpq and pgx do not
// decode '+'.
func Escape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// ViaHosts rewrites a URL DSN to connect to addrs (host:port each) instead
// of its own host.
func ViaHosts(dsn string, addrs ...string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s is not a postgres:// URL; cannot rewrite its host", EnvDSN)
	}
	u.Host = strings.Join(addrs, ",")
	return u.String(), nil
}

// Addr returns the host:port of a DSN's server, or an error for a Unix
// socket.
func Addr(dsn string) (string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return "", fmt.Errorf("%s names a Unix socket; this test needs TCP", EnvDSN)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), nil
}

// Exec runs query on the server of a store DSN (a URL with leaderrun's
// own parameters, such as leaderrun_schema, which it takes as the search
// path) and returns how many rows it affected: a test's way to change the
// store behind leaderrun's back.
func Exec(dsn, query string, args ...any) (int64, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return 0, err
	}
	q := u.Query()
	schema := q.Get("leaderrun_schema")
	if schema == "" {
		schema = "leaderrun"
	}
	for k := range q {
		if strings.HasPrefix(k, "leaderrun_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, err
	}
	tag, err := conn.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}
