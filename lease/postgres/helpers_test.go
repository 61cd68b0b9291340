package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// envDSN names the server the tests run against.
const envDSN = pgtest.EnvDSN

// serverDSN returns the test server's DSN; see pgtest.Require.
func serverDSN(t *testing.T) string {
	t.Helper()
	return pgtest.Require(t)
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
func withParam(dsn, key, value string) string { return pgtest.WithParam(dsn, key, value) }

// newSchema picks a schema no other test uses, drops it at cleanup, and
// returns the server DSN that selects it.
func newSchema(t *testing.T) (dsn, schema string) {
	t.Helper()
	return pgtest.NewSchema(t)
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

// viaProxy rewrites a URL DSN to connect to addrs instead of its host.
func viaProxy(t *testing.T, dsn string, addrs ...string) string {
	t.Helper()
	via, err := pgtest.ViaHosts(dsn, addrs...)
	if err != nil {
		citest.Missing(t, "%v", err)
	}
	return via
}

// serverAddr is the test server's host:port.
func serverAddr(t *testing.T) string {
	t.Helper()
	addr, err := pgtest.Addr(serverDSN(t))
	if err != nil {
		citest.Missing(t, "%v", err)
	}
	return addr
}

// listening waits until s's listener has LISTEN in effect and a waiter on
// name, and returns the listener's server pid.
func listening(t *testing.T, s *Store, name string) uint32 {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ok, changed := s.listener.Listening(name)
		if ok {
			return s.listener.pid.Load()
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("listener not up with a waiter on %q after 10s", name)
		}
	}
}
