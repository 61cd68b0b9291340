package postgres

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// What a hostile role on the same server, or a flaky server, can do to the
// store.

// TestNotifyFloodDoesNotMakeFollowerWrite: any role that may connect may
// NOTIFY the store's channel. A follower flooded with notifications reads
// the row at most once per lease.RereadGap and sends no acquire writes.
func TestNotifyFloodDoesNotMakeFollowerWrite(t *testing.T) {
	dsn, schema := newSchema(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var acquires atomic.Int32
	e := &elect.Elector{Store: follower, Name: "relay", Holder: "follower",
		LeaseDuration: 15 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second,
		Observe: func(op string, _ time.Duration, _ error) {
			if op == "acquire" {
				acquires.Add(1)
			}
		}}
	won := make(chan *elect.Tenure, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		ten, err := e.Campaign(cctx)
		if err == nil {
			won <- ten
		}
	}()
	listening(t, follower, "relay")
	admin := adminConn(t)
	const floods = 3000
	start := time.Now()
	for range floods {
		if _, err := admin.Exec(ctx, "SELECT pg_notify($1, 'relay')", channelName(schema)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond)
	if got := acquires.Load(); got > 1 {
		t.Errorf("the follower sent %d acquires during %d notifications in %v, want 1 (the first, refused)", got, floods, took)
	}
	if err := leader.Release(ctx, "relay", "leader", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case ten := <-won:
		ten.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not acquire after the release")
	}
}

// TestFenceDoesNotDiscloseTheToken: a role allowed to call fence learns
// that its token is stale, not what the current one is.
func TestFenceDoesNotDiscloseTheToken(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "relay", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = adminConn(t).Exec(ctx, "SELECT "+pgx.Identifier{schema}.Sanitize()+".fence('relay', 1)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != FenceSQLState {
		t.Fatalf("fence with a stale token = %v, want SQLSTATE %s", err, FenceSQLState)
	}
	text := strings.Join([]string{pgErr.Message, pgErr.Detail, pgErr.Hint}, " ")
	if token := strconv.FormatInt(rec.Token, 10); strings.Contains(text, token) {
		t.Errorf("fence's error %q discloses the current token %s", text, token)
	}
}

// TestTableDroppedMidRunIsCreatedAgain: the lease table dropped behind the
// store's back (an operator, a restore) is created again by the next
// statement; tokens go on from the clock.
func TestTableDroppedMidRunIsCreatedAgain(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	first, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, adminConn(t), "DROP TABLE "+pgx.Identifier{schema, tableName}.Sanitize())
	if _, err := s.Renew(ctx, "n", "a", first.Token, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew after the table was dropped = %v, want ErrLost (the record is gone)", err)
	}
	again, err := s.Acquire(ctx, "n", "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the table was dropped: %v", err)
	}
	if again.Token <= first.Token {
		t.Errorf("token after the table was created again = %d, want > %d", again.Token, first.Token)
	}
}

// TestInfiniteTimesDoNotBreakStatus: a record tampered with to expire at
// 'infinity' must not break List (status) for every name.
func TestInfiniteTimesDoNotBreakStatus(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	for _, name := range []string{"a", "b"} {
		if _, err := s.Acquire(ctx, name, "h", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, adminConn(t), "UPDATE "+pgx.Identifier{schema, tableName}.Sanitize()+
		" SET expires_at = 'infinity', reserved_until = '-infinity' WHERE name = 'a'")
	recs, err := s.List(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("List with an infinite expiry = %v, %v; want both records", recs, err)
	}
	if !recs[0].Held() || recs[0].Remaining < 50*365*24*time.Hour {
		t.Errorf("record with an infinite expiry = %+v, want held for a very long time", recs[0])
	}
}

// TestTokenAtMaximumIsAClearRefusal: a token at the bigint maximum cannot
// grow; the store says so instead of failing as if it were unreachable.
func TestTokenAtMaximumIsAClearRefusal(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	exec(t, adminConn(t), "UPDATE "+pgx.Identifier{schema, tableName}.Sanitize()+" SET token = 9223372036854775807 WHERE name = 'n'")
	_, err = s.Acquire(ctx, "n", "a", time.Minute)
	if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "largest value") {
		t.Errorf("Acquire with the token at its maximum = %v, want a refusal that says why", err)
	}
}

// TestReadOnlyMidRunIsRetried: the database turns read-only for a while (a
// primary switchover) after leaderrun started. The tenure ends at its
// renew deadline; the campaign does not end, as it would at startup, but
// retries until the database is writable again.
func TestReadOnlyMidRunIsRetried(t *testing.T) {
	dsn, schema := newSchema(t)
	admin := adminConn(t)
	role := "lrtest_ro_" + randomSuffix()
	roleID := pgx.Identifier{role}.Sanitize()
	exec(t, admin, "CREATE ROLE "+roleID+" LOGIN")
	t.Cleanup(func() {
		c := adminConn(t)
		c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		c.Exec(context.Background(), "DROP OWNED BY "+roleID)
		c.Exec(context.Background(), "DROP ROLE "+roleID)
	})
	if _, err := admin.PgConn().Exec(testCtx(t), SchemaSQL(schema)+GrantSQL(schema, role)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, editDSN(t, dsn, role, func(u *url.URL) { u.User = url.User(role) }))
	e := &elect.Elector{Store: s, Name: "relay", Holder: "a",
		LeaseDuration: 3 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
	kick := func(setting string) {
		exec(t, admin, "ALTER ROLE "+roleID+" "+setting)
		exec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
	}
	leasetest.RefusedMidRun(t, testCtx(t), e, "the database was read-only",
		func() { kick("SET default_transaction_read_only = on") },
		func() { kick("RESET default_transaction_read_only") })
}
