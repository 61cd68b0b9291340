package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
	"github.com/leaderrun/leaderrun/lease"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// secret is the password the bad-input DSNs carry; the trust-auth test
// server ignores it, and no error or description may show it.
const secret = "S3cret-Pw0rd"

// editDSN returns the server's URL DSN with its user set to user:secret
// and then changed by edit.
func editDSN(t *testing.T, dsn, user string, edit func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		citest.Missing(t, "%s is not a postgres:// URL; this test edits it", envDSN)
	}
	u.User = url.UserPassword(user, secret)
	if edit != nil {
		edit(u)
	}
	return u.String()
}

// addParam adds key=value to u's query, encoded the way libpq decodes.
func addParam(u *url.URL, key, value string) {
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += pgtest.Escape(key) + "=" + pgtest.Escape(value)
}

func wantNoSecret(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(text, secret) {
		t.Errorf("%s shows the password: %s", what, text)
	}
}

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

func TestOpenRefusesWhatNoRetryFixes(t *testing.T) {
	dsn, _ := newSchema(t)
	cases := []struct {
		what string
		dsn  string
	}{
		{"malformed port", editDSN(t, dsn, "postgres", func(u *url.URL) { addParam(u, "port", "notaport") })},
		{"malformed URL", "postgres://postgres:" + secret + "@127.0.0.1:99999999/test"},
		{"unknown leaderrun parameter", editDSN(t, dsn, "postgres", func(u *url.URL) {
			addParam(u, "leaderrun_bogus", "1")
		})},
		{"bad schema name", editDSN(t, dsn, "postgres", func(u *url.URL) {
			addParam(u, paramSchema, "no-dashes")
		})},
		{"bad listen value", editDSN(t, dsn, "postgres", func(u *url.URL) {
			addParam(u, paramListen, "sometimes")
		})},
		{"unknown database", editDSN(t, dsn, "postgres", func(u *url.URL) { u.Path = "/lrtest_no_such_db_" + randomSuffix() })},
		{"unknown role", editDSN(t, dsn, "lrtest_no_such_role_"+randomSuffix(), nil)},
		{"read-only session", editDSN(t, dsn, "postgres", func(u *url.URL) {
			addParam(u, "options", "-c default_transaction_read_only=on")
		})},
		{"unknown server parameter", editDSN(t, dsn, "postgres", func(u *url.URL) { addParam(u, "bogus_param", "1") })},
		{"a system schema", editDSN(t, serverDSN(t), "postgres", func(u *url.URL) { addParam(u, paramSchema, "pg_catalog") })},
		{"a parameter twice", editDSN(t, serverDSN(t), "postgres", func(u *url.URL) {
			addParam(u, paramSchema, "one")
			addParam(u, paramSchema, "two")
		})},
		{"scheme without //", "postgres:host=127.0.0.1 password=" + secret},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			err := openErr(t, c.dsn)
			if !errors.Is(err, lease.ErrRefused) {
				t.Errorf("Open = %v, want an error wrapping lease.ErrRefused", err)
			}
			t.Logf("%v", err)
		})
	}
}

func TestOpenUnreachableIsNotRefused(t *testing.T) {
	dsn, _ := newSchema(t)
	unreachable := editDSN(t, dsn, "postgres", func(u *url.URL) {
		u.Host = "127.0.0.1:1"
		addParam(u, "connect_timeout", "2")
	})
	err := openErr(t, unreachable)
	if errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of an unreachable server = %v, want an error a retry may fix (not ErrRefused)", err)
	}
	t.Logf("%v", err)
}

func TestReadOnlyServerRefusesAcquire(t *testing.T) {
	dsn, _ := newSchema(t)
	openStore(t, dsn) // creates the schema
	ro := editDSN(t, dsn, "postgres", func(u *url.URL) {
		addParam(u, "options", "-c default_transaction_read_only=on")
	})
	s := openStore(t, ro) // reading the catalog is allowed
	_, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire on a read-only session = %v, want an error wrapping lease.ErrRefused", err)
	}
	t.Logf("%v", err)
}

func TestDescribeHasNoPassword(t *testing.T) {
	dsn, _ := newSchema(t)
	for _, d := range []string{
		editDSN(t, dsn, "postgres", nil),
		editDSN(t, dsn, "postgres", func(u *url.URL) {
			u.User = url.User("postgres")
			addParam(u, "password", secret)
		}),
	} {
		s := openStore(t, d) // trust auth accepts any password
		wantNoSecret(t, "Describe()", s.Describe())
		if !strings.Contains(s.Describe(), "postgres@") {
			t.Errorf("Describe() = %q, want the user shown", s.Describe())
		}
	}
}

// TestRolePrivileges opens the store as a role that cannot log in, then as
// one that can but may not create the schema (refused), then as the same
// role once an administrator created the objects with SchemaSQL and granted
// the documented privileges (works, including fence).
func TestRolePrivileges(t *testing.T) {
	dsn, schema := newSchema(t)
	admin := adminConn(t)
	role := "lrtest_role_" + randomSuffix()
	roleID := pgx.Identifier{role}.Sanitize()
	exec(t, admin, "CREATE ROLE "+roleID+" NOLOGIN")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverDSN(t))
		if err != nil {
			t.Error(err)
			return
		}
		defer closeConn(conn)
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		if _, err := conn.Exec(ctx, "DROP OWNED BY "+roleID); err != nil {
			t.Errorf("drop owned by %s: %v", role, err)
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+roleID); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	asRole := editDSN(t, dsn, role, nil)

	err := openErr(t, asRole)
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open as a NOLOGIN role = %v, want ErrRefused", err)
	}
	t.Logf("NOLOGIN: %v", err)

	exec(t, admin, "ALTER ROLE "+roleID+" LOGIN")
	err = openErr(t, asRole)
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open as a role without CREATE = %v, want ErrRefused", err)
	}
	t.Logf("no CREATE: %v", err)

	if _, err := admin.PgConn().Exec(testCtx(t), SchemaSQL(schema)).ReadAll(); err != nil {
		t.Fatalf("SchemaSQL: %v", err)
	}
	schemaID := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.PgConn().Exec(testCtx(t), GrantSQL(schema, role)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	exec(t, admin, "GRANT EXECUTE ON FUNCTION "+schemaID+".fence(text, bigint) TO "+roleID)

	s := openStore(t, asRole)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire as the granted role: %v", err)
	}
	if _, err := s.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
		t.Fatalf("Renew as the granted role: %v", err)
	}
	if _, err := s.Acquire(ctx, "n", "b", time.Minute); !errors.As(err, new(*lease.HeldError)) {
		t.Fatalf("a refused Acquire (which prunes candidates) as the granted role = %v, want *lease.HeldError", err)
	}
	if _, err := s.Join(ctx, "g", 2, "a", time.Minute); err != nil {
		t.Fatalf("Join as the granted role: %v", err)
	}
	if _, err := s.RenewMember(ctx, "g", "a", nil, time.Minute); err != nil {
		t.Fatalf("RenewMember as the granted role: %v", err)
	}
	if err := s.Leave(ctx, "g", "a"); err != nil {
		t.Fatalf("Leave as the granted role: %v", err)
	}
	if err := s.Campaign(ctx, "n", "c", lease.Candidacy{Priority: 1, Note: "x"}, time.Minute); err != nil {
		t.Fatalf("Campaign as the granted role: %v", err)
	}
	if list, err := s.Candidates(ctx, "n"); err != nil || len(list) == 0 {
		t.Fatalf("Candidates as the granted role: %v, %v", list, err)
	}
	if err := s.Withdraw(ctx, "n", "c"); err != nil {
		t.Fatalf("Withdraw as the granted role: %v", err)
	}
	plain, _, err := splitDSN(asRole)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "SELECT "+schemaID+".fence($1, $2)", "n", rec.Token); err != nil {
		t.Errorf("fence as the granted role: %v", err)
	}
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatalf("Release as the granted role: %v", err)
	}
}

func TestConcurrentOpenCreatesSchemaOnce(t *testing.T) {
	dsn, schema := newSchema(t)
	const n = 8
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			s, err := Open(testCtx(t), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("concurrent Open did not return")
		}
	}
	var persistence string
	err := adminConn(t).QueryRow(testCtx(t), "SELECT relpersistence::text FROM pg_class WHERE oid = to_regclass($1)",
		pgx.Identifier{schema, tableName}.Sanitize()).Scan(&persistence)
	if err != nil {
		t.Fatal(err)
	}
	if persistence != "p" {
		t.Errorf("lease table relpersistence = %q, want p (logged)", persistence)
	}
}
