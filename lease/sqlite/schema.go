package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leaderrun/leaderrun/lease"
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

// addedColumns are, per table, the columns added after the table's first
// release, with their definitions, so that an existing table is upgraded
// in place.
var addedColumns = map[string][][2]string{
	"leases": {
		{"step_down", "INTEGER NOT NULL DEFAULT 0"},
		{"successor", "TEXT NOT NULL DEFAULT ''"},
		{"excluded_holder", "TEXT NOT NULL DEFAULT ''"},
		{"reserved_ms", "INTEGER NOT NULL DEFAULT 0"},
		{"location", "TEXT NOT NULL DEFAULT ''"},
	},
	"candidates": {
		{"priority", "INTEGER NOT NULL DEFAULT 0"},
		{"preempt", "INTEGER NOT NULL DEFAULT 0"},
		{"ineligible_ms", "INTEGER NOT NULL DEFAULT 0"},
		{"note", "TEXT NOT NULL DEFAULT ''"},
	},
}

// createCandidates is the table of holders that campaign for a name (a
// refused Acquire or Seize, or Campaign), each seen until seen_ms (store
// clock under boot_id): the identities a step-down may name as successor.
// priority, preempt, ineligible_ms and note are what the holder said of
// itself (lease.Candidacy); ineligible_ms is a store-clock reading under
// boot_id too, 0 for eligible. A row a refused grant wrote alone has their
// defaults, the zero Candidacy.
const createCandidates = `CREATE TABLE IF NOT EXISTS candidates (
	name    TEXT NOT NULL,
	holder  TEXT NOT NULL,
	boot_id TEXT NOT NULL,
	seen_ms INTEGER NOT NULL,
	priority      INTEGER NOT NULL DEFAULT 0,
	preempt       INTEGER NOT NULL DEFAULT 0,
	ineligible_ms INTEGER NOT NULL DEFAULT 0,
	note          TEXT NOT NULL DEFAULT '',
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

// ownColumns are, per table, the columns every version of leaderrun's table
// has: a table of that name without them belongs to something else.
var ownColumns = map[string][]string{
	"leases":     {"name", "holder", "token", "boot_id", "acquired_ms", "renewed_ms", "expires_ms", "released"},
	"candidates": {"name", "holder", "boot_id", "seen_ms"},
	"groups":     {"name", "partitions"},
	"members":    {"grp", "member", "boot_id", "expires_ms"},
}

// createTables creates or upgrades the tables in db in one transaction, or,
// for an Existing store, only checks that leaderrun's lease table is there.
// It never changes a table that is not leaderrun's.
func (s *Store) createTables(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if s.opts.Existing {
		cols, err := tableColumns(ctx, conn, "leases")
		if err != nil {
			return err
		}
		if len(cols) == 0 {
			return fmt.Errorf("the database has no leaderrun lease table: %w", lease.ErrNoStore)
		}
		return checkOwn(cols, "leases")
	}
	// Tables that are all there, whole, need nothing: no write lock, for
	// which a replica starting beside busy ones would queue.
	if tablesComplete(ctx, conn) {
		return nil
	}
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
	return nil
}

// tablesComplete reports whether every table of leaderrun's is there and
// leaderrun's, with every column that migrate would add: a read, under no
// write lock. Anything else (an error too) leaves the answer to migrate.
func tablesComplete(ctx context.Context, conn *sql.Conn) bool {
	for table := range ownColumns {
		cols, err := tableColumns(ctx, conn, table)
		if err != nil || len(cols) == 0 || checkOwn(cols, table) != nil {
			return false
		}
		for _, c := range addedColumns[table] {
			if !cols[c[0]] {
				return false
			}
		}
	}
	return true
}

// tableColumns lists table's columns; none when it does not exist.
func tableColumns(ctx context.Context, conn *sql.Conn, table string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info(?1)`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			return nil, err
		}
		cols[col] = true
	}
	return cols, rows.Err()
}

// checkOwn refuses an existing table that lacks leaderrun's columns.
func checkOwn(cols map[string]bool, table string) error {
	for _, c := range ownColumns[table] {
		if !cols[c] {
			return lease.Refused(fmt.Errorf("the database has a table %q that is not leaderrun's (it has no column %q): "+
				"give leaderrun a database file of its own", table, c))
		}
	}
	return nil
}

// migrate creates the tables, or adds what an older version's tables
// lack. It runs inside the caller's transaction, and first checks every
// table of leaderrun's names that exists, so that it changes nothing in a
// database that belongs to something else.
func migrate(ctx context.Context, conn *sql.Conn) error {
	existing := map[string]map[string]bool{}
	for table := range ownColumns {
		cols, err := tableColumns(ctx, conn, table)
		if err != nil {
			return err
		}
		if len(cols) > 0 {
			if err := checkOwn(cols, table); err != nil {
				return err
			}
		}
		existing[table] = cols
	}
	for _, q := range []string{createTable, createCandidates, createGroups, createMembers} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for table, added := range addedColumns {
		have := existing[table]
		if len(have) == 0 {
			continue // created just now, with every column
		}
		for _, c := range added {
			if have[c[0]] {
				continue
			}
			if _, err := conn.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+c[0]+` `+c[1]); err != nil {
				return err
			}
		}
	}
	return nil
}
