package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

const columns = `name, holder, token, boot_id, acquired_ms, renewed_ms, expires_ms, released,
	step_down, successor, excluded_holder, reserved_ms, location`

// The *_ms columns hold store-clock readings in milliseconds, comparable
// only with readings taken under the same boot_id. Rows are never deleted
// by the store.
//
// step_down, successor, excluded_holder and reserved_ms hold a step-down
// request and its reservation (reserved_ms 0: none); see
// lease.Store.RequestStepDown. A reservation written during another boot
// has ended. location is the holder's lease.Record.Where.
const createTable = `CREATE TABLE IF NOT EXISTS leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	token       INTEGER NOT NULL,
	boot_id     TEXT NOT NULL,
	acquired_ms INTEGER NOT NULL,
	renewed_ms  INTEGER NOT NULL,
	expires_ms  INTEGER NOT NULL,
	released    INTEGER NOT NULL DEFAULT 0,
	step_down   INTEGER NOT NULL DEFAULT 0,
	successor   TEXT NOT NULL DEFAULT '',
	excluded_holder TEXT NOT NULL DEFAULT '',
	reserved_ms INTEGER NOT NULL DEFAULT 0,
	location    TEXT NOT NULL DEFAULT ''
) STRICT`

// addedColumns are the leases columns added after the first release, with
// their definitions, so that an existing table is upgraded in place.
var addedColumns = [][2]string{
	{"step_down", "INTEGER NOT NULL DEFAULT 0"},
	{"successor", "TEXT NOT NULL DEFAULT ''"},
	{"excluded_holder", "TEXT NOT NULL DEFAULT ''"},
	{"reserved_ms", "INTEGER NOT NULL DEFAULT 0"},
	{"location", "TEXT NOT NULL DEFAULT ''"},
}

// createCandidates is the table of holders that tried to acquire a name,
// each seen until seen_ms (store clock under boot_id): the identities a
// step-down may name as successor.
const createCandidates = `CREATE TABLE IF NOT EXISTS candidates (
	name    TEXT NOT NULL,
	holder  TEXT NOT NULL,
	boot_id TEXT NOT NULL,
	seen_ms INTEGER NOT NULL,
	PRIMARY KEY (name, holder)
) STRICT`

// createGroups records each group's number of partitions; its partitions'
// leases are rows of leases named by lease.PartitionKey.
const createGroups = `CREATE TABLE IF NOT EXISTS groups (
	name       TEXT PRIMARY KEY,
	partitions INTEGER NOT NULL
) STRICT`

// createMembers holds each group's members, each live until expires_ms
// (store clock under boot_id).
const createMembers = `CREATE TABLE IF NOT EXISTS members (
	grp        TEXT NOT NULL,
	member     TEXT NOT NULL,
	boot_id    TEXT NOT NULL,
	expires_ms INTEGER NOT NULL,
	PRIMARY KEY (grp, member)
) STRICT`

func (s *Store) createTables(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// BEGIN IMMEDIATE takes the write lock first, waiting up to
	// busyTimeout for it, so that concurrent openers queue instead of
	// failing to upgrade a read lock.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	if err := migrate(ctx, conn); err != nil {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("create tables: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("create tables: %w", err)
	}
	// A table of that name from something else fails here, not later.
	if _, err := s.queryRows(ctx, `SELECT `+columns+` FROM leases LIMIT 0`); err != nil {
		return fmt.Errorf("check table: %w", err)
	}
	return nil
}

// migrate creates the tables, or adds what an older version's table lacks.
// It runs inside the caller's transaction.
func migrate(ctx context.Context, conn *sql.Conn) error {
	for _, q := range []string{createTable, createCandidates, createGroups, createMembers} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	have := map[string]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info('leases')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			return err
		}
		have[col] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	for _, c := range addedColumns {
		if have[c[0]] {
			continue
		}
		if _, err := conn.ExecContext(ctx, `ALTER TABLE leases ADD COLUMN `+c[0]+` `+c[1]); err != nil {
			return err
		}
	}
	return nil
}
