package mysql

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/lease"
)

// editDSN returns dsn with its user information set to user (and password
// pw, if not empty) and then changed by edit.
func editDSN(t *testing.T, dsn, user, pw string, edit func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("%s is not a URL; this test edits it", envDSN)
	}
	u.User = url.User(user)
	if pw != "" {
		u.User = url.UserPassword(user, pw)
	}
	if edit != nil {
		edit(u)
	}
	return u.String()
}

// openErr opens dsn, expecting an error that shows no password on one
// line.
func openErr(t *testing.T, dsn string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) succeeded, want an error", redact(dsn))
	}
	wantNoSecret(t, "Open's error", err.Error())
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Open's error spans lines: %q", err)
	}
	return err
}

// newUser creates a user with password secret, dropped at cleanup, and
// returns its name.
func newUser(t *testing.T, db *sql.DB) string {
	t.Helper()
	user := mysqltest.RandomName()
	exec(t, db, "CREATE USER "+account(user)+" IDENTIFIED BY "+quote(secret))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP USER "+account(user)); err != nil {
			t.Errorf("drop user %s: %v", user, err)
		}
	})
	return user
}

// pw is u's password, "" for none.
func pw(u *url.URL) string {
	p, _ := u.User.Password()
	return p
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// account is user's account name for any host; GRANT and CREATE USER take
// no placeholders.
func account(user string) string { return quote(user) + "@'%'" }

func TestOpenRefusesWhatNoRetryFixes(t *testing.T) {
	dsn, dbName := newDatabase(t)
	server := admin(t, serverDSN(t))
	user := newUser(t, server)
	root, _ := url.Parse(dsn)
	for _, c := range []struct {
		what string
		dsn  string
	}{
		{"wrong password", editDSN(t, dsn, user, "not-"+secret, nil)},
		{"unknown user", editDSN(t, dsn, mysqltest.RandomName(), secret, nil)},
		{"password for a user without one", editDSN(t, dsn, root.User.Username(), secret, nil)},
		{"unknown database", editDSN(t, dsn, root.User.Username(), pw(root), func(u *url.URL) { u.Path = "/" + mysqltest.RandomName() })},
		{"no privilege on the database", editDSN(t, dsn, user, secret, nil)},
		{"TLS the server does not offer", editDSN(t, dsn, user, secret, func(u *url.URL) { u.RawQuery = "tls=true" })},
	} {
		t.Run(c.what, func(t *testing.T) {
			err := openErr(t, c.dsn)
			if !errors.Is(err, lease.ErrRefused) {
				t.Errorf("Open = %v, want an error wrapping lease.ErrRefused", err)
			}
			t.Logf("%v", err)
		})
	}
	// A user that may read but not create: refused with the hint.
	exec(t, server, "GRANT SELECT ON `"+dbName+"`.* TO "+account(user))
	err := openErr(t, editDSN(t, dsn, user, secret, nil))
	if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "SchemaSQL") {
		t.Errorf("Open as a user who may not create tables = %v, want ErrRefused with the hint", err)
	}
	t.Logf("no CREATE: %v", err)
}

func TestOpenUnreachableIsNotRefused(t *testing.T) {
	dsn, _ := newDatabase(t)
	err := openErr(t, editDSN(t, dsn, "root", secret, func(u *url.URL) {
		u.Host = "127.0.0.1:1"
		u.RawQuery = "timeout=2s"
	}))
	if errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of an unreachable server = %v, want an error a retry may fix (not ErrRefused)", err)
	}
	t.Logf("%v", err)
}

// TestUserPrivileges opens the store as a user who may not create
// leaderrun's objects, once an administrator created them with SchemaSQL's
// statements and granted the documented privileges; and calls fence as a
// child's user with nothing but EXECUTE on it.
func TestUserPrivileges(t *testing.T) {
	dsn, _ := newDatabase(t)
	server := admin(t, serverDSN(t))
	db := admin(t, dsn)
	for _, stmt := range upgradeStatements(schemaState{}) {
		exec(t, db, stmt)
	}
	app, child := newUser(t, server), newUser(t, server)
	for _, grant := range []string{
		"SELECT, INSERT, UPDATE ON `" + leasesTable + "`",
		"SELECT, INSERT, UPDATE ON `" + tokensTable + "`",
		"SELECT, INSERT, UPDATE ON `" + candidatesTable + "`",
		"SELECT, INSERT, UPDATE ON `" + groupsTable + "`",
		"SELECT, INSERT, UPDATE, DELETE ON `" + membersTable + "`",
		"EXECUTE ON PROCEDURE `" + fenceProcedure + "`",
		"EXECUTE ON PROCEDURE `" + renewProcedure + "`",
		"EXECUTE ON PROCEDURE `" + seenProcedure + "`",
	} {
		exec(t, db, "GRANT "+grant+" TO "+account(app))
	}
	exec(t, db, "GRANT EXECUTE ON PROCEDURE `"+fenceProcedure+"` TO "+account(child))

	s := openStore(t, editDSN(t, dsn, app, secret, nil))
	wantNoSecret(t, "Describe()", s.Describe())
	if !strings.Contains(s.Describe(), app+"@") {
		t.Errorf("Describe() = %q, want the user shown", s.Describe())
	}
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire as the granted user: %v", err)
	}
	if _, err := s.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := s.Join(ctx, "g", 2, "a", time.Minute); err != nil {
		t.Fatalf("Join: %v", err)
	}
	if _, err := s.RenewMember(ctx, "g", "a", nil, time.Minute); err != nil {
		t.Fatalf("RenewMember: %v", err)
	}
	if err := s.Leave(ctx, "g", "a"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := s.Campaign(ctx, "n", "c", lease.Candidacy{Priority: 1, Note: "x"}, time.Minute); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if list, err := s.Candidates(ctx, "n"); err != nil || len(list) == 0 {
		t.Fatalf("Candidates: %v, %v", list, err)
	}
	if err := s.Withdraw(ctx, "n", "c"); err != nil {
		t.Fatalf("Withdraw: %v", err)
	}

	childDB := admin(t, editDSN(t, dsn, child, secret, nil))
	tx := beginChild(t, childDB)
	if got := tx.fence(t, "n", rec.Token); got != "" {
		t.Errorf("fence as a user with only EXECUTE: SQLSTATE %q", got)
	}
	tx.tx.Rollback()
	if _, err := childDB.ExecContext(ctx, "SELECT token FROM `"+tokensTable+"`"); err == nil {
		t.Error("the child's user reads the tokens table; want only EXECUTE on fence")
	}
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestReadOnlyServerRefusesWrites makes a server read-only for users
// without the privilege to write anyway, as a replica is: Open (the tables
// exist) succeeds, writes are refused. The server is the test's own: on
// the shared one, read_only would refuse the writes of every other test's
// users (the chaos suite's replicas among them) while it lasted.
func TestReadOnlyServerRefusesWrites(t *testing.T) {
	base := mysqltest.Private(t)
	dsn, dbName := mysqltest.NewDatabaseOn(t, base)
	server := admin(t, base)
	user := newUser(t, server)
	exec(t, server, "GRANT ALL ON `"+dbName+"`.* TO "+account(user))
	as := editDSN(t, dsn, user, secret, nil)
	openStore(t, as) // creates the tables
	exec(t, server, "SET GLOBAL read_only = ON")
	s := openStore(t, as)
	_, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire on a read-only server = %v, want an error wrapping lease.ErrRefused", err)
	}
	t.Logf("%v", err)
}

func TestLongValuesAreRefused(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	long := strings.Repeat("x", maxNameLen+1)
	if _, err := s.Acquire(ctx, long, "a", time.Minute); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire of a %d-byte name = %v, want ErrRefused", len(long), err)
	}
	if _, err := s.Acquire(ctx, "n", long, time.Minute); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire by a %d-byte holder = %v, want ErrRefused", len(long), err)
	}
	if recs, err := s.List(ctx); err != nil || len(recs) != 0 {
		t.Errorf("List after refused Acquires = %v, %v; want nothing written", recs, err)
	}
	rec, err := s.Acquire(ctx, strings.Repeat("n", maxNameLen), "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire of a %d-byte name: %v", maxNameLen, err)
	}
	if err := s.Annotate(ctx, rec.Name, "a", rec.Token, strings.Repeat("w", maxWhereLen+1)); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Annotate with a %d-byte where = %v, want ErrRefused", maxWhereLen+1, err)
	}
	if _, err := s.Join(ctx, strings.Repeat("g", maxNameLen-2), 16, "a", time.Minute); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Join of a group whose partition names exceed %d bytes = %v, want ErrRefused", maxNameLen, err)
	}
}
