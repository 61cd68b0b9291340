package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// envDSN names the server the tests run against.
const envDSN = "LEADERRUN_TEST_POSTGRES"

const defaultTestDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	reachOnce sync.Once
	reachErr  error
)

// serverDSN returns the test server's DSN. It skips the test when the
// server is unreachable, or fails it when CI is set: CI must not pass by
// skipping.
func serverDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		dsn = defaultTestDSN
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			reachErr = err
			return
		}
		conn.Close(ctx)
	})
	if reachErr != nil {
		msg := "PostgreSQL at " + redact(dsn) + " is unreachable (" + scrub(reachErr.Error(), dsnSecrets(dsn)) +
			"); set " + envDSN + " to the DSN of a server to test against"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dsn
}

// adminConn is a plain connection to the test server, closed at cleanup.
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, serverDSN(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { closeConn(conn) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(testCtx(t), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func randomSuffix() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// withParam adds a query parameter to a URL DSN.
func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + escape(key) + "=" + escape(value)
}

// escape %-encodes s for a DSN query, spaces as %20: libpq and pgx do not
// decode '+'.
func escape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// newSchema picks a schema no other test uses, drops it at cleanup, and
// returns the server DSN that selects it.
func newSchema(t *testing.T) (dsn, schema string) {
	t.Helper()
	base := serverDSN(t)
	schema = "lrtest_" + randomSuffix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer closeConn(conn)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withParam(base, paramSchema, schema), schema
}

// openStore opens dsn and closes the store at cleanup.
func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// viaProxy rewrites a URL DSN to connect to addr instead of its host.
func viaProxy(t *testing.T, dsn string, addrs ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a single-host postgres:// URL; this test rewrites its host", envDSN)
	}
	u.Host = strings.Join(addrs, ",")
	return u.String()
}

// serverAddr is the test server's host:port.
func serverAddr(t *testing.T) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		t.Skipf("%s names a Unix socket; this test needs TCP", envDSN)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// listening waits until s's listener has LISTEN in effect and a waiter on
// name, and returns the listener's server pid.
func listening(t *testing.T, s *Store, name string) uint32 {
	t.Helper()
	l := s.listener
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		ok, pid, state, subs := l.up && len(l.waiters[name]) > 0, l.pid, l.state, l.subs
		l.mu.Unlock()
		if ok {
			return pid
		}
		select {
		case <-state:
		case <-subs:
		case <-deadline:
			t.Fatalf("listener not up with a waiter on %q after 10s", name)
		}
	}
}
