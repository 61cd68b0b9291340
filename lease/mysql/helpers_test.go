package mysql

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
)

// envDSN names the server the tests run against.
const envDSN = mysqltest.EnvDSN

// serverDSN returns the test server's DSN; see mysqltest.Require.
func serverDSN(t *testing.T) string {
	t.Helper()
	return mysqltest.Require(t)
}

// newDatabase creates a database no other test uses, drops it at cleanup,
// and returns the server DSN that names it.
func newDatabase(t *testing.T) (dsn, db string) {
	t.Helper()
	return mysqltest.NewDatabase(t)
}

// admin is a connection pool to dsn as the test server's user, closed at
// cleanup.
func admin(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := mysqltest.Admin(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(testCtx(t), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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

// serverAddr is the test server's host:port.
func serverAddr(t *testing.T) string {
	t.Helper()
	addr, err := mysqltest.Addr(serverDSN(t))
	if err != nil {
		t.Skip(err)
	}
	return addr
}

// viaHost rewrites a URL DSN to connect to addr instead of its host.
func viaHost(t *testing.T, dsn, addr string) string {
	t.Helper()
	via, err := mysqltest.ViaHost(dsn, addr)
	if err != nil {
		t.Skip(err)
	}
	return via
}

// otherUser creates a user that may use leaderrun's objects in dbName but
// not interrupt other users' sessions, drops it at cleanup, and returns
// dsn as that user.
func otherUser(t *testing.T, db *sql.DB, dsn, dbName string) string {
	t.Helper()
	user := mysqltest.RandomName()
	exec(t, db, "CREATE USER '"+user+"'@'%' IDENTIFIED BY 'pw'")
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'") })
	exec(t, db, "GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON `"+dbName+"`.* TO '"+user+"'@'%'")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, "pw")
	return u.String()
}
