package postgres

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// FenceSQLState is the SQLSTATE that the fence function raises when the
// token it was given is not the current, unreleased, unexpired token.
const FenceSQLState = "LR001"

// tableName is the lease table's name inside the schema.
const tableName = "leases"

// candidatesName is the name of the table of candidates inside the schema:
// the holders that tried to acquire a name, each seen until seen_until.
const candidatesName = "candidates"

// groupsName and membersName are the tables of groups (their number of
// partitions) and of their members.
const (
	groupsName  = "groups"
	membersName = "members"
)

// SchemaSQL returns the statements that create leaderrun's schema, lease
// table and fence function, idempotently. Open runs them when the objects
// are missing; an administrator can run them ahead of time for a role that
// may not create objects, then grant that role the privileges listed in
// the package documentation.
//
// Columns added since the table was first created are added by ALTER TABLE
// … ADD COLUMN IF NOT EXISTS, so running SchemaSQL again upgrades an
// existing table in place.
func SchemaSQL(schema string) string {
	s := pgx.Identifier{schema}.Sanitize()
	t := pgx.Identifier{schema, tableName}.Sanitize()
	c := pgx.Identifier{schema, candidatesName}.Sanitize()
	g := pgx.Identifier{schema, groupsName}.Sanitize()
	m := pgx.Identifier{schema, membersName}.Sanitize()
	return fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;

CREATE TABLE IF NOT EXISTS %[2]s (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    token       bigint NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    released    boolean NOT NULL DEFAULT false,
    -- Makes token a key column: an acquire, which changes the token, must
    -- lock the row FOR UPDATE and so waits for every transaction that
    -- passed %[1]s.fence; a renew changes no key column and does not.
    UNIQUE (name, token)
);

-- A step-down request and its reservation (lease.Store.RequestStepDown):
-- until reserved_until only successor may acquire the name or, when
-- successor is empty, anyone but excluded_holder.
ALTER TABLE %[2]s
    ADD COLUMN IF NOT EXISTS step_down       boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS successor       text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS excluded_holder text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS reserved_until  timestamptz;

-- Where the holder runs (lease.Record.Where), for a follower on its host.
ALTER TABLE %[2]s
    ADD COLUMN IF NOT EXISTS location text NOT NULL DEFAULT '';

-- Groups of partitions: a partition's lease is the row of %[2]s named
-- "GROUP #P". The number of partitions is fixed when a group is created.
CREATE TABLE IF NOT EXISTS %[5]s (
    name       text PRIMARY KEY,
    partitions integer NOT NULL CHECK (partitions > 0)
);

-- The members of each group, live while expires_at is in the future.
CREATE TABLE IF NOT EXISTS %[6]s (
    grp        text NOT NULL,
    member     text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (grp, member)
);

-- Holders that campaign for a name (a refused acquire, or Campaign): the
-- identities a step-down may name as successor while seen_until is in the
-- future.
CREATE TABLE IF NOT EXISTS %[4]s (
    name       text NOT NULL,
    holder     text NOT NULL,
    seen_until timestamptz NOT NULL,
    PRIMARY KEY (name, holder)
);

-- What each candidate said of itself (lease.Candidacy): a row a refused
-- acquire wrote alone keeps the defaults, the zero Candidacy.
-- ineligible_until NULL: eligible. note is bytes, as the replica wrote them.
ALTER TABLE %[4]s
    ADD COLUMN IF NOT EXISTS priority         integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS preempt          boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS ineligible_until timestamptz,
    ADD COLUMN IF NOT EXISTS note             bytea NOT NULL DEFAULT ''::bytea;

-- fence raises SQLSTATE %[3]s unless lease_token is the current,
-- unreleased and unexpired token of lease_name (by clock_timestamp), and
-- holds FOR KEY SHARE on the lease row until the calling transaction ends.
CREATE OR REPLACE FUNCTION %[1]s.fence(lease_name text, lease_token bigint)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fence$
DECLARE
    cur record;
BEGIN
    -- leaderrun fence v2 (schemaExists looks for this line)
    SELECT l.token, l.released, l.expires_at, l.expires_at > clock_timestamp() AS live
      INTO cur
      FROM %[2]s AS l
     WHERE l.name = lease_name
       FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '%[3]s',
            MESSAGE = format('leaderrun: lease %%L has no holder; token %%s is stale', lease_name, lease_token);
    END IF;
    IF cur.token <> lease_token OR cur.released OR NOT cur.live THEN
        RAISE EXCEPTION USING ERRCODE = '%[3]s',
            MESSAGE = format('leaderrun: token %%s of lease %%L is stale', lease_token, lease_name),
            -- The current token is not disclosed: a role that may call
            -- fence need not learn it.
            DETAIL = CASE WHEN cur.token <> lease_token THEN 'another tenure holds the lease'
                          WHEN cur.released THEN 'the lease was released'
                          ELSE 'the lease has expired' END;
    END IF;
END
$fence$;

REVOKE ALL ON FUNCTION %[1]s.fence(text, bigint) FROM PUBLIC;
`, s, t, FenceSQLState, c, g, m)
}

// GrantSQL returns the statements that give role what leaderrun needs in
// schema's objects, when an administrator created them ahead of time with
// SchemaSQL: USAGE on the schema; SELECT, INSERT and UPDATE on the leases
// and groups tables; and DELETE too on candidates and members, which
// leaderrun prunes.
func GrantSQL(schema, role string) string {
	id := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	r := pgx.Identifier{role}.Sanitize()
	return fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT SELECT, INSERT, UPDATE ON %[3]s, %[4]s TO %[2]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[5]s, %[6]s TO %[2]s;
`, pgx.Identifier{schema}.Sanitize(), r, id(tableName), id(groupsName), id(candidatesName), id(membersName))
}

// ensureSchema creates the schema, table and fence function unless they
// exist. Creation runs in one transaction under an advisory lock, because
// concurrent CREATE … IF NOT EXISTS can still fail on the catalogs' unique
// indexes when many replicas start at once. When the objects exist, it
// needs no privilege beyond USAGE on the schema.
func (s *Store) ensureSchema(ctx context.Context) error {
	return s.pool.do(ctx, func(conn *pgx.Conn) error {
		if err := s.createSchema(ctx, conn); err != nil {
			return fmt.Errorf("create schema %s: %w", s.schema, err)
		}
		return nil
	})
}

// requireSchema fails with lease.ErrNoStore unless the schema's objects
// exist; it creates nothing.
func (s *Store) requireSchema(ctx context.Context) error {
	return s.pool.do(ctx, func(conn *pgx.Conn) error {
		ok, err := s.schemaExists(ctx, conn)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("schema %s has no leaderrun tables (or those of an older version): %w", s.schema, lease.ErrNoStore)
		}
		return nil
	})
}

func (s *Store) createSchema(ctx context.Context, conn *pgx.Conn) error {
	if ok, err := s.schemaExists(ctx, conn); err != nil || ok {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockKey(s.schema)); err != nil {
		return err
	}
	// Another replica may have created everything while we waited.
	if ok, err := s.schemaExists(ctx, conn); err != nil || ok {
		return err
	}
	if _, err := conn.PgConn().Exec(ctx, SchemaSQL(s.schema)).ReadAll(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// schemaExists reports whether every object SchemaSQL creates exists,
// including the columns added last: a table of an older version makes it
// false, so that SchemaSQL upgrades it.
func (s *Store) schemaExists(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regprocedure($2) IS NOT NULL
	AND to_regclass($3) IS NOT NULL AND to_regclass($4) IS NOT NULL AND to_regclass($5) IS NOT NULL
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'location' AND NOT attisdropped)
	AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($3) AND attname = 'note' AND NOT attisdropped)
	AND EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure($2) AND prosrc LIKE '%leaderrun fence v2%')`,
		s.table, pgx.Identifier{s.schema}.Sanitize()+".fence(text, bigint)", s.candidates, s.groups, s.members,
	).Scan(&ok)
	return ok, err
}

// schemaLockKey is the advisory lock that serializes creating schema.
func schemaLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("leaderrun schema " + schema))
	return int64(h.Sum64())
}
