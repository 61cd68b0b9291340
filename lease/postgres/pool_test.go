package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAliveTellsClosedFromIdle: the pool's check of an idle connection
// (alive) says yes for an open one, without consuming anything from it,
// and no once the server has ended the session (what a restart or an
// administrator's pg_terminate_backend does).
func TestAliveTellsClosedFromIdle(t *testing.T) {
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for range 3 {
		if !alive(conn) {
			t.Fatal("alive = false for an open, idle connection")
		}
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the connection is unusable after the checks: %v", err)
	}

	if _, err := adminConn(t).Exec(ctx, "SELECT pg_terminate_backend($1)", conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(conn); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("alive = true 5s after the server ended the session")
		}
	}
}
