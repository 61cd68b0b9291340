package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
)

// fence calls the fence function in tx and returns its SQLSTATE, or "" on
// success.
func fence(t *testing.T, tx pgx.Tx, schema, name string, token int64) string {
	t.Helper()
	_, err := tx.Exec(testCtx(t), "SELECT "+pgx.Identifier{schema}.Sanitize()+".fence($1, $2)", name, token)
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("fence(%q, %d): %v", name, token, err)
	}
	return pgErr.Code
}

// childTx begins a transaction on a connection of its own, as a child
// process would, and rolls it back at cleanup if it is still open.
func childTx(t *testing.T) (pgx.Tx, uint32) {
	t.Helper()
	conn := adminConn(t)
	tx, err := conn.Begin(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	return tx, conn.PgConn().PID()
}

func TestFenceRefusesStaleToken(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)

	first, err := s.Acquire(ctx, "relay", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(first.Remaining + 50*time.Millisecond) // expiry is under test
	tx, _ := childTx(t)
	if got, want := fence(t, tx, schema, "relay", first.Token), FenceSQLState; got != want {
		t.Errorf("fence with an expired token: SQLSTATE %q, want %q", got, want)
	}
	tx.Rollback(ctx)

	second, err := s.Acquire(ctx, "relay", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		what  string
		name  string
		token int64
		want  string
	}{
		{"the current token", "relay", second.Token, ""},
		{"the previous tenure's token", "relay", first.Token, FenceSQLState},
		{"a future token", "relay", second.Token + 1, FenceSQLState},
		{"a name never acquired", "other", second.Token, FenceSQLState},
	}
	for _, c := range cases {
		tx, _ := childTx(t)
		if got := fence(t, tx, schema, c.name, c.token); got != c.want {
			t.Errorf("fence with %s: SQLSTATE %q, want %q", c.what, got, c.want)
		}
		tx.Rollback(ctx)
	}

	if err := s.Release(ctx, "relay", "b", second.Token); err != nil {
		t.Fatal(err)
	}
	tx, _ = childTx(t)
	if got, want := fence(t, tx, schema, "relay", second.Token), FenceSQLState; got != want {
		t.Errorf("fence with a released token: SQLSTATE %q, want %q", got, want)
	}
}

// TestFenceBlocksTakeoverNotRenewal holds fence in an open child
// transaction and checks that the leader's renewal and release go through
// while another holder's acquire cannot commit until the child's
// transaction ends. The control case drops UNIQUE (name, token) to show
// that the constraint is what makes an acquire wait.
func TestFenceBlocksTakeoverNotRenewal(t *testing.T) {
	for _, tc := range []struct {
		ending  string
		control bool
	}{{"expiry", false}, {"release", false}, {"release", true}} {
		name := "after " + tc.ending
		if tc.control {
			name = "control without the token key after " + tc.ending
		}
		ending := tc.ending
		t.Run(name, func(t *testing.T) {
			dsn, schema := newSchema(t)
			leader, follower := openStore(t, dsn), openStore(t, dsn)
			ctx := testCtx(t)
			admin := adminConn(t)
			exec(t, admin, "CREATE TABLE "+pgx.Identifier{schema, "outbox"}.Sanitize()+" (token bigint)")
			if tc.control {
				exec(t, admin, "ALTER TABLE "+pgx.Identifier{schema, tableName}.Sanitize()+" DROP CONSTRAINT leases_name_token_key")
			}

			rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tx, childPID := childTx(t)
			if got := fence(t, tx, schema, "relay", rec.Token); got != "" {
				t.Fatalf("fence with the current token: SQLSTATE %q", got)
			}

			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start := time.Now()
			renewed, err := leader.Renew(rctx, "relay", "leader", rec.Token, 300*time.Millisecond)
			cancel()
			if err != nil {
				t.Fatalf("Renew while a child transaction holds fence: %v", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("Renew took %v while a child transaction holds fence, want it not blocked", took)
			}
			switch ending {
			case "expiry":
				time.Sleep(renewed.Remaining + 50*time.Millisecond) // expiry is under test
			case "release":
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := leader.Release(rctx, "relay", "leader", rec.Token)
				cancel()
				if err != nil {
					t.Fatalf("Release while a child transaction holds fence: %v", err)
				}
			}

			type result struct {
				rec lease.Record
				err error
			}
			acquired := make(chan result, 1)
			var locked atomic.Int32 // acquires that gave up on the locked row, as the election retries them
			go func() {
				for {
					rec, err := follower.Acquire(ctx, "relay", "follower", time.Minute)
					if errors.Is(err, lease.ErrLocked) {
						locked.Add(1)
						continue
					}
					acquired <- result{rec, err}
					return
				}
			}()
			if tc.control {
				select {
				case r := <-acquired:
					if r.err != nil {
						t.Fatalf("Acquire: %v", r.err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("without the token key, Acquire still waited for the child transaction")
				}
				return
			}
			waitBlockedBy(t, admin, childPID)
			// The takeover waits as long as the transaction is open, and
			// says why every lock_timeout instead of timing out blind.
			time.Sleep(1500 * time.Millisecond)
			select {
			case r := <-acquired:
				t.Fatalf("Acquire returned (%+v, %v) while the child transaction was open", r.rec, r.err)
			default:
			}
			if locked.Load() == 0 {
				t.Errorf("no Acquire reported lease.ErrLocked during 1.5s of waiting for the child transaction (lock_timeout %s)", lockTimeout)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "outbox"}.Sanitize()+" VALUES ($1)", rec.Token); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
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

// waitBlockedBy waits until some session waits for a lock held by pid.
func waitBlockedBy(t *testing.T, admin *pgx.Conn, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := admin.QueryRow(testCtx(t),
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", int(pid)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Sprintf("no session blocked by the child transaction (pid %d) after 10s", pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
