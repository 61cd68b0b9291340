package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgAdmin is a connection to the server's maintenance database, for
// creating and dropping the benchmark's databases and reading statistics
// (from outside those databases, so the reads are not counted in them).
type pgAdmin struct {
	base *url.URL // the -pg DSN

	mu   sync.Mutex // guards conn (one statement at a time) and dbs
	conn *pgx.Conn
	dbs  []string // created, to drop at the end
}

func openPGAdmin(ctx context.Context, dsn string) (*pgAdmin, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse -pg: %w", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return nil, fmt.Errorf("-pg must name a loopback host, not %q", h)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &pgAdmin{base: u, conn: conn}, nil
}

// dsnFor is the -pg DSN pointed at database db.
func (a *pgAdmin) dsnFor(db string) string {
	u := *a.base
	u.Path = "/" + db
	return u.String()
}

// createDB creates a fresh database for one measurement.
func (a *pgAdmin) createDB(ctx context.Context, db string) error {
	a.dropDB(ctx, db)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	a.dbs = append(a.dbs, db)
	return nil
}

func (a *pgAdmin) dropDB(ctx context.Context, db string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
}

func (a *pgAdmin) close(ctx context.Context) {
	a.mu.Lock()
	dbs := a.dbs
	a.mu.Unlock()
	for _, db := range dbs {
		a.dropDB(ctx, db)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conn.Close(ctx)
}

// xacts is xact_commit + xact_rollback of db as the statistics system has
// it now. Backends report at most once a second (and idle ones within
// about 10s), so a reading lags the truth by a few transactions.
func (a *pgAdmin) xacts(ctx context.Context, db string) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// A fresh snapshot, not the one cached for this transaction.
	a.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
	var n int64
	err := a.conn.QueryRow(ctx,
		`SELECT coalesce(xact_commit + xact_rollback, 0) FROM pg_stat_database WHERE datname = $1`, db).Scan(&n)
	return n, err
}

// backendPids lists the server processes serving db.
func (a *pgAdmin) backendPids(ctx context.Context, db string) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rows, err := a.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, db)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// auxPids lists the postmaster and its auxiliary processes (WAL
// writer, checkpointer, ...): every postgres process not serving a client.
func (a *pgAdmin) auxPids(ctx context.Context) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rows, err := a.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type <> 'client backend'`)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	var post int
	if err := a.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&post); err == nil {
		if pp := parentPid(post); pp > 1 {
			pids = append(pids, pp)
		}
	}
	return pids, nil
}

func (a *pgAdmin) version(ctx context.Context) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var v string
	if err := a.conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "?"
	}
	return strings.Fields(v)[0]
}
