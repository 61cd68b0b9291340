package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// TestRefusedAcquireWritesNothing: a follower's Acquire of a name that is
// held is a read. It neither locks the lease row (which would make it wait
// for the leader's child's fenced transaction, and give up after
// lock_timeout with a warning about a lock nobody left behind) nor writes
// its candidate row while that row is fresh, so it costs the server no
// transaction id and no WAL flush: at a hand-off, the followers that lose
// do not slow down the one that wins.
func TestRefusedAcquireWritesNothing(t *testing.T) {
	dsn, schema := newSchema(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	admin := adminConn(t)
	rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := follower.Acquire(actx, "relay", "follower", time.Minute)
		var held *lease.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("%s: Acquire of a held name: %v, want a *lease.HeldError", what, err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("%s: the refused Acquire took %v", what, took)
		}
	}
	marks := func() (rowXmax, seenUntil string) {
		t.Helper()
		err := admin.QueryRow(ctx, "SELECT l.xmax::text, c.seen_until::text FROM "+
			pgx.Identifier{schema, tableName}.Sanitize()+" l, "+pgx.Identifier{schema, candidatesName}.Sanitize()+
			" c WHERE l.name = 'relay' AND c.name = 'relay' AND c.holder = 'follower'").Scan(&rowXmax, &seenUntil)
		if err != nil {
			t.Fatal(err)
		}
		return rowXmax, seenUntil
	}

	refused("first") // records the follower as a candidate
	xmax, seen := marks()
	refused("second")
	if x, s := marks(); x != xmax || s != seen {
		t.Errorf("a second refused Acquire changed the row's xmax %s → %s (a row lock) or the candidate's seen_until %s → %s",
			xmax, x, seen, s)
	}

	// The leader's child holds fence in a transaction: the row is locked
	// against a takeover, and a refused Acquire does not wait for it.
	tx, _ := childTx(t)
	if got := fence(t, tx, schema, "relay", rec.Token); got != "" {
		t.Fatalf("fence with the current token: SQLSTATE %q", got)
	}
	refused("during the child's fenced transaction")
}
