package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// writesTable is the table of the children's fenced writes, kept in the
// store itself (PostgreSQL, MySQL): the committed rows are the strongest
// witness of what a stale child could still do.
type writesTable interface {
	// create creates the empty table.
	create() error
	// writes returns every committed write in insertion (id) order.
	writes() ([]dbWrite, error)
}

// dbWrite is one committed fenced write, as the table has it.
type dbWrite struct {
	id    int64
	token int64
	part  string // "" for one name
	pid   int
	role  string
	at    time.Time
}

// pgSide is the PostgreSQL the replicas and the children share.
type pgSide struct {
	base   string // the server's DSN, without leaderrun's parameters
	schema string // the lease schema; also holds chaos_writes
}

func (p *pgSide) create() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{p.schema}.Sanitize()
	_, err = conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s+`;
		CREATE TABLE `+s+`.chaos_writes (
			id    bigserial PRIMARY KEY,
			token bigint NOT NULL,
			part  text NOT NULL,
			pid   int NOT NULL,
			role  text NOT NULL,
			at    timestamptz NOT NULL DEFAULT clock_timestamp())`)
	return err
}

func (p *pgSide) writes() ([]dbWrite, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.base)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, token, part, pid, role, at FROM `+pgx.Identifier{p.schema}.Sanitize()+`.chaos_writes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read chaos_writes: %w", err)
	}
	var ws []dbWrite
	for rows.Next() {
		var w dbWrite
		if err := rows.Scan(&w.id, &w.token, &w.part, &w.pid, &w.role, &w.at); err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, rows.Err()
}
