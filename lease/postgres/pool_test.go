package postgres

import (
	"context"
	"errors"
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

// TestCancelledStatementKeepsIdleConnections: a statement its caller
// cancels costs its own connection only. The idle ones stay, so the next
// statement needs no new server process; a network error still drops
// them all.
func TestCancelledStatementKeepsIdleConnections(t *testing.T) {
	cfg, err := pgx.ParseConfig(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(cfg)
	defer p.close()
	pidOf := func(ctx context.Context) (pid uint32, err error) {
		err = p.do(ctx, func(c *pgx.Conn) error {
			pid = c.PgConn().PID()
			_, err := c.Exec(ctx, "SELECT 1")
			return err
		})
		return pid, err
	}
	// Two connections in the pool: one statement holds the first while
	// the second runs.
	held := make(chan struct{})
	released := make(chan struct{})
	go p.do(t.Context(), func(*pgx.Conn) error { close(held); <-released; return nil })
	<-held
	idlePID, err := pidOf(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	close(released)
	for deadline := time.Now().Add(5 * time.Second); len(idleOf(p)) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections, want 2", len(idleOf(p)))
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = p.do(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT pg_sleep(5)")
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled statement: %v, want context.Canceled", err)
	}
	idle := idleOf(p)
	if len(idle) != 1 {
		t.Fatalf("%d idle connections after a cancelled statement, want the other one", len(idle))
	}
	if pid, err := pidOf(t.Context()); err != nil || (pid != idlePID && pid != idle[0]) {
		t.Errorf("the next statement ran on server process %d (%v), want an idle connection's (%v)", pid, err, idle)
	}
}

// idleOf returns the server process ids of p's idle connections.
func idleOf(p *pool) []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []uint32
	for _, ic := range p.idle {
		pids = append(pids, ic.conn.PgConn().PID())
	}
	return pids
}
