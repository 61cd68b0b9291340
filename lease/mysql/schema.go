package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
)

// FenceSQLState is the SQLSTATE that the fence procedure signals when the
// token it was given is not the current, unreleased, unexpired one (with
// MySQL error number 1644, ER_SIGNAL_EXCEPTION).
const FenceSQLState = "LR001"

// The objects leaderrun creates in the DSN's database.
const (
	leasesTable     = "leaderrun_leases"
	tokensTable     = "leaderrun_tokens"
	candidatesTable = "leaderrun_candidates"
	groupsTable     = "leaderrun_groups"
	membersTable    = "leaderrun_members"
	fenceProcedure  = "leaderrun_fence"
)

// fenceVersion marks the fence procedure's definition in its comment, so
// that Open replaces one an older version created.
const fenceVersion = "leaderrun fence v1"

// Lengths of the binary columns; the store refuses longer values rather
// than let a server in a non-strict sql_mode truncate them.
const (
	maxNameLen  = 255
	maxWhereLen = 2048
)

type column struct{ name, def string }

// table is one of leaderrun's tables. Columns are added to an existing
// table in place when missing, but only to a table that has every column
// of ident: a table without them is someone else's and is never altered.
type table struct {
	name    string
	columns []column
	key     string
	ident   []string
	comment string
}

var tables = []table{{
	name:    leasesTable,
	comment: "One row per lease name; never deleted by leaderrun.",
	columns: []column{
		{"name", "VARBINARY(255) NOT NULL"},
		{"holder", "VARBINARY(255) NOT NULL"},
		{"token", "BIGINT NOT NULL"},
		{"acquired_at", "DATETIME(6) NOT NULL"}, // UTC, as every DATETIME here
		{"renewed_at", "DATETIME(6) NOT NULL"},
		{"expires_at", "DATETIME(6) NOT NULL"},
		{"released", "BOOLEAN NOT NULL DEFAULT FALSE"},
		// A step-down request and its reservation: until reserved_until
		// only successor may acquire the name or, when successor is
		// empty, anyone but excluded_holder.
		{"step_down", "BOOLEAN NOT NULL DEFAULT FALSE"},
		{"successor", "VARBINARY(255) NOT NULL DEFAULT ''"},
		{"excluded_holder", "VARBINARY(255) NOT NULL DEFAULT ''"},
		{"reserved_until", "DATETIME(6) NULL DEFAULT NULL"},
		{"location", "VARBINARY(2048) NOT NULL DEFAULT ''"}, // lease.Record.Where
		// Raised by every change a waiter cares about (not by renewals);
		// waiters poll it.
		{"version", "BIGINT NOT NULL DEFAULT 0"},
	},
	key:   "name",
	ident: []string{"name", "holder", "token", "expires_at"},
}, {
	name: tokensTable,
	comment: "The last token granted per name, kept apart from the lease row: fence share-locks this row, " +
		"which only a grant writes, so that renewals of the lease row never wait for a fenced transaction.",
	columns: []column{
		{"name", "VARBINARY(255) NOT NULL"},
		{"token", "BIGINT NOT NULL"},
	},
	key:   "name",
	ident: []string{"name", "token"},
}, {
	name:    candidatesTable,
	comment: "Holders that tried to acquire a name: the successors a step-down may name while seen_until is ahead.",
	columns: []column{
		{"name", "VARBINARY(255) NOT NULL"},
		{"holder", "VARBINARY(255) NOT NULL"},
		{"seen_until", "DATETIME(6) NOT NULL"},
	},
	key:   "name, holder",
	ident: []string{"name", "holder", "seen_until"},
}, {
	name:    groupsTable,
	comment: "Groups of partitions; version is raised by every change of members or of the tenure of a partition.",
	columns: []column{
		{"name", "VARBINARY(255) NOT NULL"},
		{"partitions", "INT NOT NULL"},
		{"version", "BIGINT NOT NULL DEFAULT 0"},
	},
	key:   "name",
	ident: []string{"name", "partitions"},
}, {
	name:    membersTable,
	comment: "The members of each group, live while expires_at is ahead.",
	columns: []column{
		{"grp", "VARBINARY(255) NOT NULL"},
		{"member", "VARBINARY(255) NOT NULL"},
		{"expires_at", "DATETIME(6) NOT NULL"},
	},
	key:   "grp, member",
	ident: []string{"grp", "member", "expires_at"},
}}

func (t table) createSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS `%s` (\n", t.name)
	for _, c := range t.columns {
		fmt.Fprintf(&b, "    `%s` %s,\n", c.name, c.def)
	}
	fmt.Fprintf(&b, "    PRIMARY KEY (%s)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='%s'", t.key, t.comment)
	return b.String()
}

func (t table) addColumnSQL(c column) string {
	return fmt.Sprintf("ALTER TABLE `%s` ADD COLUMN `%s` %s", t.name, c.name, c.def)
}

// fenceSQL creates the fence procedure. It share-locks the name's row of
// the tokens table, which only a grant writes: a takeover waits for the
// calling transaction to end, while renewals, which write only the lease
// row, do not. Its read of the lease row takes no lock.
var fenceSQL = fmt.Sprintf("CREATE PROCEDURE `%[1]s`(IN lease_name VARBINARY(255), IN lease_token BIGINT)\n"+
	`    READS SQL DATA
    SQL SECURITY DEFINER
    COMMENT '%[4]s'
BEGIN
    DECLARE current_token BIGINT DEFAULT NULL;
    DECLARE live INT DEFAULT 0;
    DECLARE msg VARCHAR(128) DEFAULT LEFT(CONCAT('leaderrun: token ', lease_token, ' of lease ',
        CONVERT(lease_name USING utf8mb4), ' is not current'), 128);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET current_token = NULL;
    -- The share lock: a grant, which must raise this row's token, waits
    -- until the calling transaction ends.
    SELECT token INTO current_token FROM `+"`%[2]s`"+`
        WHERE name = lease_name AND token = lease_token LOCK IN SHARE MODE;
    IF current_token IS NULL THEN
        SIGNAL SQLSTATE '%[5]s' SET MESSAGE_TEXT = msg;
    END IF;
    SELECT COUNT(*) INTO live FROM `+"`%[3]s`"+`
        WHERE name = lease_name AND token = lease_token AND NOT released
            AND expires_at > UTC_TIMESTAMP(6);
    IF live = 0 THEN
        SIGNAL SQLSTATE '%[5]s' SET MESSAGE_TEXT = msg;
    END IF;
END`, fenceProcedure, tokensTable, leasesTable, fenceVersion, FenceSQLState)

// SchemaSQL returns the statements that create leaderrun's tables and fence
// procedure, for the mysql command-line client (the procedure is set off
// with DELIMITER). Open runs them when the objects are missing; an
// administrator can run them ahead of time in the database the DSN names,
// for a user that may not create objects, and then grant that user the
// privileges listed in the package documentation.
func SchemaSQL() string {
	var b strings.Builder
	for _, t := range tables {
		b.WriteString(t.createSQL())
		b.WriteString(";\n\n")
	}
	fmt.Fprintf(&b, "DROP PROCEDURE IF EXISTS `%s`;\nDELIMITER //\n%s//\nDELIMITER ;\n", fenceProcedure, fenceSQL)
	return b.String()
}

// schemaState is what exists of leaderrun's objects in the database.
type schemaState struct {
	columns      map[string][]string // table → its columns
	engines      map[string]string   // table → its storage engine
	hasFence     bool                // the fence procedure exists
	fenceComment string              // its comment, which names its version
}

// current reports whether every object exists as this version needs it.
func (st schemaState) current() bool {
	for _, t := range tables {
		for _, c := range t.columns {
			if !slices.Contains(st.columns[t.name], c.name) {
				return false
			}
		}
	}
	return st.hasFence && st.fenceComment == fenceVersion
}

// foreign returns an error for a table of one of leaderrun's names that
// leaderrun did not create: it lacks an identifying column or is not
// InnoDB; and for a procedure of fence's name that no version of leaderrun
// created. Such objects are never altered.
func (st schemaState) foreign() error {
	if st.hasFence && !strings.HasPrefix(st.fenceComment, "leaderrun fence ") {
		return fmt.Errorf("procedure %s exists but is not leaderrun's; leaderrun will not replace it: "+
			"drop or rename it, or use another database", fenceProcedure)
	}
	for _, t := range tables {
		cols, ok := st.columns[t.name]
		if !ok {
			continue
		}
		for _, c := range t.ident {
			if !slices.Contains(cols, c) {
				return fmt.Errorf("table %s exists but is not leaderrun's (it has no column %s); "+
					"leaderrun will not alter it: drop or rename it, or use another database", t.name, c)
			}
		}
		if e := st.engines[t.name]; !strings.EqualFold(e, "InnoDB") {
			return fmt.Errorf("table %s uses the %s engine, not InnoDB, which leaderrun's transactions and locks need", t.name, e)
		}
	}
	return nil
}

// ensureSchema creates leaderrun's tables and fence procedure unless they
// exist, and adds the columns a newer version needs to tables an older one
// created. It first only reads information_schema; if anything is missing
// it takes a named lock (GET_LOCK, server-wide, keyed by the database) so
// that replicas starting at once create everything exactly once, reads
// again, and creates what is still missing.
//
// With existing it creates nothing: a schema that is not current is
// lease.ErrNoStore.
func (s *Store) ensureSchema(ctx context.Context, existing bool) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := readSchema(ctx, conn)
	if err != nil {
		return err
	}
	if err := st.foreign(); err != nil {
		return refused(err)
	}
	if st.current() {
		return nil
	}
	if existing {
		return fmt.Errorf("database %s has no leaderrun tables (or those of an older version): %w", s.dbName, lease.ErrNoStore)
	}
	key := schemaLockKey(s.dbName)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", key).Scan(&got); err != nil {
		return err
	}
	if got.Int64 != 1 {
		return fmt.Errorf("another replica has been creating leaderrun's tables for 30s (named lock %s)", key)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", key)
	if st, err = readSchema(ctx, conn); err != nil {
		return err
	}
	if err := st.foreign(); err != nil {
		return refused(err)
	}
	for _, stmt := range upgradeStatements(st) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create leaderrun's tables: %w", err)
		}
	}
	return nil
}

// upgradeStatements are the statements that bring st to this version.
func upgradeStatements(st schemaState) []string {
	var out []string
	for _, t := range tables {
		cols, ok := st.columns[t.name]
		if !ok {
			out = append(out, t.createSQL())
			continue
		}
		for _, c := range t.columns {
			if !slices.Contains(cols, c.name) {
				out = append(out, t.addColumnSQL(c))
			}
		}
	}
	if !st.hasFence || st.fenceComment != fenceVersion {
		out = append(out, "DROP PROCEDURE IF EXISTS `"+fenceProcedure+"`", fenceSQL)
	}
	return out
}

// readSchema reads which of leaderrun's objects exist in the connection's
// database.
func readSchema(ctx context.Context, conn *sql.Conn) (schemaState, error) {
	st := schemaState{columns: map[string][]string{}, engines: map[string]string{}}
	names := make([]any, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	in := placeholders(len(names))
	rows, err := conn.QueryContext(ctx, `SELECT c.TABLE_NAME, c.COLUMN_NAME, t.ENGINE
FROM information_schema.COLUMNS c JOIN information_schema.TABLES t
	ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME IN (`+in+`)`, names...)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var tbl, col string
		var engine sql.NullString
		if err := rows.Scan(&tbl, &col, &engine); err != nil {
			return st, err
		}
		st.columns[tbl] = append(st.columns[tbl], col)
		st.engines[tbl] = engine.String
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	err = conn.QueryRowContext(ctx, `SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'`, fenceProcedure).Scan(&st.fenceComment)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return st, err
	default:
		st.hasFence = true
	}
	return st, nil
}

// schemaLockKey is the named lock that serializes creating leaderrun's
// objects in database db. Named locks are server-wide, hence the database
// in the key.
func schemaLockKey(db string) string {
	return lockName("schema", db)
}

// lockName is a server-wide named lock for parts, at most 64 characters
// (MySQL's limit): "leaderrun." and a hash of the parts.
func lockName(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "leaderrun." + hex.EncodeToString(h[:])[:54]
}

// placeholders is n comma-separated '?'.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
