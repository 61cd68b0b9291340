package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestOldTableIsUpgraded opens a schema as the release before step-down
// left it (no step-down columns, no candidates table): Open adds what is
// missing, keeps the rows, and fence still works.
func TestOldTableIsUpgraded(t *testing.T) {
	dsn, schema := newSchema(t)
	admin := adminConn(t)
	if _, err := admin.PgConn().Exec(testCtx(t), SchemaSQL(schema)).ReadAll(); err != nil {
		t.Fatalf("SchemaSQL: %v", err)
	}
	table := pgx.Identifier{schema, tableName}.Sanitize()
	exec(t, admin, "DROP TABLE "+pgx.Identifier{schema, candidatesName}.Sanitize())
	exec(t, admin, "ALTER TABLE "+table+" DROP COLUMN step_down, DROP COLUMN successor, DROP COLUMN excluded_holder, DROP COLUMN reserved_until")
	exec(t, admin, "INSERT INTO "+table+" (name, holder, token, acquired_at, renewed_at, expires_at, released) VALUES ('n', 'old', 4102444800000, now(), now(), now(), true)")

	s := openStore(t, dsn)
	ctx := testCtx(t)
	old, err := s.Get(ctx, "n")
	if err != nil {
		t.Fatalf("Get of a row from the old table: %v", err)
	}
	if old.Holder != "old" || old.Token != 4102444800000 || old.StepDown || old.Reserved != 0 {
		t.Errorf("Get = %+v, want the old row with no step-down", old)
	}
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire on the upgraded table: %v", err)
	}
	if rec.Token <= old.Token {
		t.Errorf("token = %d, want > %d", rec.Token, old.Token)
	}
	if _, err := s.RequestStepDown(ctx, "n", "", time.Minute); err != nil {
		t.Fatalf("RequestStepDown on the upgraded table: %v", err)
	}
	// A tenure asked to step down is still current for fence.
	if _, err := admin.Exec(ctx, "SELECT "+pgx.Identifier{schema}.Sanitize()+".fence($1, $2)", "n", rec.Token); err != nil {
		t.Errorf("fence after the upgrade and a step-down request: %v", err)
	}
}

// TestStepDownDoesNotWaitForFencedTransaction: a step-down request changes
// no key column, so a child's open fenced transaction does not block it,
// and the tenure stays current for fence until it is released.
func TestStepDownDoesNotWaitForFencedTransaction(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "relay", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := childTx(t)
	if got := fence(t, tx, schema, "relay", rec.Token); got != "" {
		t.Fatalf("fence: SQLSTATE %q", got)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.RequestStepDown(short, "relay", "", time.Minute); err != nil {
		t.Fatalf("RequestStepDown while a fenced transaction is open: %v", err)
	}
	if _, err := s.Renew(short, "relay", "a", rec.Token, time.Minute); err != nil {
		t.Fatalf("Renew while a fenced transaction is open: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx2, _ := childTx(t)
	if got := fence(t, tx2, schema, "relay", rec.Token); got != "" {
		t.Errorf("fence after the step-down request: SQLSTATE %q, want success until release", got)
	}
}
