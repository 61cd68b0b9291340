package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leaderrun/leaderrun/lease"
)

// childTx is a child's transaction on a session of its own, in the
// server's default isolation level (REPEATABLE READ).
type childTx struct {
	tx *sql.Tx
	id int64 // the session's CONNECTION_ID()
}

// beginChild begins a transaction on a connection of its own, as a child
// process would, and rolls it back at cleanup if it is still open.
func beginChild(t *testing.T, db *sql.DB) childTx {
	t.Helper()
	conn, err := db.Conn(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id int64
	if err := conn.QueryRowContext(testCtx(t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return childTx{tx, id}
}

// fence calls the fence procedure in the child's transaction and returns
// its SQLSTATE, or "" on success.
func (c childTx) fence(t *testing.T, name string, token int64) string {
	t.Helper()
	_, err := c.tx.ExecContext(testCtx(t), "CALL `"+fenceProcedure+"`(?, ?)", name, token)
	if err == nil {
		return ""
	}
	var myErr *driver.MySQLError
	if !errors.As(err, &myErr) {
		t.Fatalf("fence(%q, %d): %v", name, token, err)
	}
	if strings.Contains(myErr.Message, "current token") {
		t.Errorf("fence's error %q discloses the current token", myErr.Message)
	}
	return string(myErr.SQLState[:])
}

func TestFenceRefusesStaleToken(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)

	first, err := s.Acquire(ctx, "relay", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(first.Remaining + 50*time.Millisecond) // expiry is under test
	child := beginChild(t, db)
	if got, want := child.fence(t, "relay", first.Token), FenceSQLState; got != want {
		t.Errorf("fence with an expired token: SQLSTATE %q, want %q", got, want)
	}
	child.tx.Rollback()

	second, err := s.Acquire(ctx, "relay", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		name  string
		token int64
		want  string
	}{
		{"the current token", "relay", second.Token, ""},
		{"the previous tenure's token", "relay", first.Token, FenceSQLState},
		{"a future token", "relay", second.Token + 1, FenceSQLState},
		{"a name never acquired", "other", second.Token, FenceSQLState},
	} {
		child := beginChild(t, db)
		if got := child.fence(t, c.name, c.token); got != c.want {
			t.Errorf("fence with %s: SQLSTATE %q, want %q", c.what, got, c.want)
		}
		child.tx.Rollback()
	}

	// A tenure asked to step down is current until it is released.
	if _, err := s.RequestStepDown(ctx, "relay", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	child = beginChild(t, db)
	if got := child.fence(t, "relay", second.Token); got != "" {
		t.Errorf("fence after a step-down request: SQLSTATE %q, want success until the release", got)
	}
	child.tx.Rollback()
	if err := s.Release(ctx, "relay", "b", second.Token); err != nil {
		t.Fatal(err)
	}
	child = beginChild(t, db)
	if got, want := child.fence(t, "relay", second.Token), FenceSQLState; got != want {
		t.Errorf("fence with a released token: SQLSTATE %q, want %q", got, want)
	}
}

// fenceVariant replaces the fence procedure with fenceSQL edited by the
// replacements (old, new, …), each of which must apply exactly once.
func fenceVariant(t *testing.T, db *sql.DB, replacements ...string) {
	t.Helper()
	q := routines[0].createSQL()
	for i := 0; i < len(replacements); i += 2 {
		if n := strings.Count(q, replacements[i]); n != 1 {
			t.Fatalf("fenceSQL contains %q %d times, want once", replacements[i], n)
		}
		q = strings.Replace(q, replacements[i], replacements[i+1], 1)
	}
	exec(t, db, "DROP PROCEDURE `"+fenceProcedure+"`")
	exec(t, db, q)
}

// The two halves of fence's design that its variants change.
const (
	lockTokenRow  = "WHERE name = lease_name LOCK IN SHARE MODE;"
	readLeaseRow  = "AND expires_at > UTC_TIMESTAMP(6);"
	tokenRowPlain = "WHERE name = lease_name;"
	leaseRowShare = "AND expires_at > UTC_TIMESTAMP(6) LOCK IN SHARE MODE;"
)

// TestFenceBlocksTakeoverNotRenewal holds fence in an open child
// transaction and checks that the leader's renewal, step-down request and
// release go through while another holder's acquire cannot commit until
// the child's transaction ends. Two controls show what the design rests
// on: without the share lock on the tokens row, the acquire does not wait;
// with the share lock on the lease row instead, the renewal waits.
func TestFenceBlocksTakeoverNotRenewal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ending  string
		variant []string
		// renewBlocked: the leader's renewal waits for the child;
		// takeoverFree: another's acquire does not.
		renewBlocked, takeoverFree bool
	}{
		{name: "after expiry", ending: "expiry"},
		{name: "after release", ending: "release"},
		{name: "control without the share lock", ending: "release",
			variant: []string{lockTokenRow, tokenRowPlain}, takeoverFree: true},
		{name: "control locking the lease row", ending: "release",
			variant: []string{lockTokenRow, tokenRowPlain, readLeaseRow, leaseRowShare}, renewBlocked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, _ := newDatabase(t)
			leader, follower := openStore(t, dsn), openStore(t, dsn)
			db := admin(t, dsn)
			ctx := testCtx(t)
			exec(t, db, "CREATE TABLE outbox (token BIGINT) ENGINE=InnoDB")
			if tc.variant != nil {
				fenceVariant(t, db, tc.variant...)
			}

			rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			child := beginChild(t, db)
			if got := child.fence(t, "relay", rec.Token); got != "" {
				t.Fatalf("fence with the current token: SQLSTATE %q", got)
			}

			took, err := timed(ctx, 2*time.Second, func(ctx context.Context) error {
				_, err := leader.Renew(ctx, "relay", "leader", rec.Token, 300*time.Millisecond)
				return err
			})
			if tc.renewBlocked {
				if err == nil && took < time.Second {
					t.Fatalf("control: Renew took %v and succeeded while the child share-locks the lease row, want it blocked", took)
				}
				t.Logf("control: Renew while the child share-locks the lease row: %v after %v", err, took)
				return
			}
			if err != nil {
				t.Fatalf("Renew while a child transaction holds fence: %v", err)
			}
			if took > time.Second {
				t.Errorf("Renew took %v while a child transaction holds fence, want it not blocked", took)
			}
			if _, err := timed(ctx, 2*time.Second, func(ctx context.Context) error {
				_, err := leader.RequestStepDown(ctx, "relay", "", time.Millisecond)
				return err
			}); err != nil {
				t.Fatalf("RequestStepDown while a child transaction holds fence: %v", err)
			}
			switch tc.ending {
			case "expiry":
				time.Sleep(300*time.Millisecond + 50*time.Millisecond) // expiry is under test
			case "release":
				if _, err := timed(ctx, 2*time.Second, func(ctx context.Context) error {
					return leader.Release(ctx, "relay", "leader", rec.Token)
				}); err != nil {
					t.Fatalf("Release while a child transaction holds fence: %v", err)
				}
			}

			type result struct {
				rec lease.Record
				err error
			}
			acquired := make(chan result, 1)
			go func() {
				rec, err := follower.Acquire(ctx, "relay", "follower", time.Minute)
				acquired <- result{rec, err}
			}()
			if tc.takeoverFree {
				select {
				case r := <-acquired:
					if r.err != nil {
						t.Fatalf("Acquire: %v", r.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("control: without the share lock, Acquire still waited for the child transaction")
				}
				return
			}
			waitBlockedBy(t, db, func() {
				select {
				case r := <-acquired:
					t.Fatalf("Acquire returned (%+v, %v) while the child transaction was open", r.rec, r.err)
				default:
				}
			})
			if _, err := child.tx.ExecContext(ctx, "INSERT INTO outbox VALUES (?)", rec.Token); err != nil {
				t.Fatal(err)
			}
			if err := child.tx.Commit(); err != nil {
				t.Fatalf("child's commit: %v", err)
			}
			select {
			case r := <-acquired:
				if r.err != nil {
					t.Fatalf("Acquire after the child committed: %v", r.err)
				}
				if r.rec.Token <= rec.Token {
					t.Errorf("new token %d, want > %d", r.rec.Token, rec.Token)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Acquire did not return after the child transaction committed")
			}
		})
	}
}

// timed runs fn with a timeout and reports how long it took.
func timed(ctx context.Context, timeout time.Duration, fn func(context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	return time.Since(start), err
}

// waitBlockedBy waits until a transaction waits for a lock on a row of
// the tokens table that a shared lock blocks: in these tests, only the
// child's fence takes one. It calls check between looks.
func waitBlockedBy(t *testing.T, db *sql.DB, check func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		check()
		var n int
		err := db.QueryRowContext(testCtx(t), `SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_LOCKS r ON r.lock_id = w.requested_lock_id
JOIN information_schema.INNODB_LOCKS b ON b.lock_id = w.blocking_lock_id
WHERE r.lock_table = CONCAT('`+"`"+`', DATABASE(), '`+"`.`"+tokensTable+"`"+`') AND b.lock_mode = 'S'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no transaction waits for the child's shared lock on the tokens row after 10s")
		}
		// InnoDB refreshes these tables only when they have not been
		// read for 100 ms: reading them more often shows stale rows.
		time.Sleep(150 * time.Millisecond)
	}
}

// TestWrongTokenFenceLocksNothing: a transaction whose fence was refused
// (a token that is not the current one, or the current one after its
// lease expired) stays open, and another holder's takeover of the expired
// lease must not wait for it. The control calls fence with the current
// token while the lease is live: that transaction does hold the takeover
// up until it ends.
func TestWrongTokenFenceLocksNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// token picks the token fence is called with from the previous
		// tenure's and the current one's.
		token         func(stale, current int64) int64
		afterExpiry   bool // call fence once the lease has expired
		wantRefusal   bool
		takeoverWaits bool
	}{
		{name: "token 0", token: func(_, _ int64) int64 { return 0 }, wantRefusal: true},
		{name: "stale token", token: func(stale, _ int64) int64 { return stale }, wantRefusal: true},
		{name: "expired token", token: func(_, cur int64) int64 { return cur }, afterExpiry: true, wantRefusal: true},
		{name: "control with the current token", token: func(_, cur int64) int64 { return cur }, takeoverWaits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, _ := newDatabase(t)
			leader, follower := openStore(t, dsn), openStore(t, dsn)
			db := admin(t, dsn)
			ctx := testCtx(t)

			old, err := leader.Acquire(ctx, "relay", "old", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := leader.Release(ctx, "relay", "old", old.Token); err != nil {
				t.Fatal(err)
			}
			const ttl = 500 * time.Millisecond
			rec, err := leader.Acquire(ctx, "relay", "leader", ttl)
			if err != nil {
				t.Fatal(err)
			}
			token := tc.token(old.Token, rec.Token)
			child := beginChild(t, db)
			if !tc.afterExpiry {
				if got := child.fence(t, "relay", token); (got == FenceSQLState) != tc.wantRefusal {
					t.Fatalf("fence with token %d: SQLSTATE %q, want refusal %v", token, got, tc.wantRefusal)
				}
			}
			time.Sleep(rec.Remaining + 50*time.Millisecond) // expiry is under test
			if tc.afterExpiry {
				if got := child.fence(t, "relay", token); got != FenceSQLState {
					t.Fatalf("fence with the expired token %d: SQLSTATE %q, want %q", token, got, FenceSQLState)
				}
			}
			// The child's transaction stays open while the follower takes
			// the expired lease over.
			took, err := timed(ctx, 3*time.Second, func(ctx context.Context) error {
				_, err := follower.Acquire(ctx, "relay", "follower", time.Minute)
				return err
			})
			if tc.takeoverWaits {
				if err == nil {
					t.Fatalf("control: Acquire took over after %v while the child's correctly fenced transaction was open, want it to wait", took)
				}
				t.Logf("control: Acquire while a correctly fenced transaction is open: %v after %v", err, took)
				child.tx.Rollback()
				if _, err := follower.Acquire(ctx, "relay", "follower", time.Minute); err != nil {
					t.Fatalf("Acquire after the child rolled back: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Acquire while a transaction refused by fence (token %d) is open: %v after %v, want it not to wait", token, err, took)
			}
			if took > time.Second {
				t.Errorf("Acquire took %v while a transaction refused by fence is open, want it not to wait", took)
			}
			t.Logf("takeover beside a transaction refused by fence (token %d): %v", token, took)
		})
	}
}
