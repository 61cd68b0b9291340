package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
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
	renewProcedure  = "leaderrun_renew"
	seenProcedure   = "leaderrun_candidate"
)

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
		// What the candidate said of itself (lease.Candidacy); a row a
		// refused acquire wrote alone keeps the defaults, the zero
		// Candidacy. ineligible_until NULL: eligible.
		{"priority", "INT NOT NULL DEFAULT 0"},
		{"preempt", "BOOLEAN NOT NULL DEFAULT FALSE"},
		{"ineligible_until", "DATETIME(6) NULL DEFAULT NULL"},
		{"note", "VARBINARY(256) NOT NULL DEFAULT ''"}, // at most lease.MaxNote bytes
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

// routine is one of leaderrun's stored procedures. Its comment, "leaderrun
// <what> v<N>", names its version: Open replaces an older version in place
// and leaves a newer one (a later leaderrun's) alone. A procedure keeps its
// name and parameters across versions; a new signature gets a new name.
type routine struct {
	name    string
	what    string // the comment's middle word
	version int
	body    string // CREATE PROCEDURE without the comment; %s is where it goes
}

func (r routine) comment() string { return fmt.Sprintf("leaderrun %s v%d", r.what, r.version) }

// createSQL is the CREATE PROCEDURE statement.
func (r routine) createSQL() string { return fmt.Sprintf(r.body, r.comment()) }

// routineVersion is the version a comment of r's names, and whether it is
// a comment of r's at all (one some version of leaderrun wrote).
func (r routine) routineVersion(comment string) (int, bool) {
	rest, ok := strings.CutPrefix(comment, "leaderrun "+r.what+" v")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(rest)
	return v, err == nil
}

// fenceSQL creates the fence procedure (version 2). It first reads the
// lease row without a lock and refuses a token that is not the current,
// unreleased, unexpired one; only then does it share-lock the name's row
// of the tokens table, which only a grant writes, and check the token
// again (a grant may have committed in between). A takeover waits for the
// calling transaction to end, while renewals, which write only the lease
// row, do not; a caller with a wrong or expired token locks nothing.
// Version 1 locked the tokens row first, whatever the token, so that a
// caller without the token could hold up a takeover until its
// transaction ended.
var fenceSQL = fmt.Sprintf("CREATE PROCEDURE `%[1]s`(IN lease_name VARBINARY(255), IN lease_token BIGINT)\n"+
	`    READS SQL DATA
    SQL SECURITY DEFINER
    COMMENT '%%s'
BEGIN
    DECLARE current_token BIGINT DEFAULT NULL;
    DECLARE live INT DEFAULT 0;
    DECLARE msg VARCHAR(128) DEFAULT LEFT(CONCAT('leaderrun: token ', lease_token, ' of lease ',
        CONVERT(lease_name USING utf8mb4), ' is not current'), 128);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET current_token = NULL;
    -- A read that locks nothing: a wrong, released or expired token is
    -- refused before anything is locked.
    SELECT COUNT(*) INTO live FROM `+"`%[3]s`"+`
        WHERE name = lease_name AND token = lease_token AND NOT released
            AND expires_at > UTC_TIMESTAMP(6);
    IF live = 0 THEN
        SIGNAL SQLSTATE '%[4]s' SET MESSAGE_TEXT = msg;
    END IF;
    -- The share lock: a grant, which must raise this row's token, waits
    -- until the calling transaction ends. The locking read sees the latest
    -- grant: a token raised since the read above is refused.
    SELECT token INTO current_token FROM `+"`%[2]s`"+`
        WHERE name = lease_name LOCK IN SHARE MODE;
    IF current_token IS NULL OR current_token <> lease_token THEN
        SIGNAL SQLSTATE '%[4]s' SET MESSAGE_TEXT = msg;
    END IF;
END`, fenceProcedure, tokensTable, leasesTable, FenceSQLState)

// renewSQL creates the procedure Renew calls: one statement, one round
// trip. In one transaction it extends the lease if the holder holds it
// with the token, unreleased and unexpired, and returns the row as the
// UPDATE left it; no row when it did not qualify. The server's clock is
// read once, for the condition, the write and the reply.
var renewSQL = fmt.Sprintf("CREATE PROCEDURE `%[1]s`(IN lease_name VARBINARY(255), IN lease_holder VARBINARY(255),\n"+
	`    IN lease_token BIGINT, IN ttl_us BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
    COMMENT '%%s'
BEGIN
    DECLARE clock_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    START TRANSACTION;
    UPDATE `+"`%[2]s`"+` SET renewed_at = clock_now, expires_at = clock_now + INTERVAL ttl_us MICROSECOND
        WHERE name = lease_name AND holder = lease_holder AND token = lease_token AND NOT released
            AND expires_at > clock_now;
    -- Only the row this UPDATE matched: one it did not may have been
    -- written at clock_now too (granted, then released, in the same
    -- microsecond).
    IF ROW_COUNT() > 0 THEN
        SELECT %[3]s FROM `+"`%[2]s`"+`
            WHERE name = lease_name AND holder = lease_holder AND token = lease_token AND renewed_at = clock_now;
    END IF;
    COMMIT;
END`, renewProcedure, leasesTable, recordColumnsAt("clock_now"))

// seenSQL creates the procedure a follower's Acquire calls first: it
// records the holder as a candidate until now + seen_us and returns the
// lease row (if any) and the server's clock, from which the store decides
// whether the name is free. One statement, one round trip.
var seenSQL = fmt.Sprintf("CREATE PROCEDURE `%[1]s`(IN lease_name VARBINARY(255), IN lease_holder VARBINARY(255),\n"+
	`    IN seen_us BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY INVOKER
    COMMENT '%%s'
BEGIN
    DECLARE clock_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    INSERT INTO `+"`%[2]s`"+` (name, holder, seen_until) VALUES (lease_name, lease_holder, clock_now + INTERVAL seen_us MICROSECOND)
        ON DUPLICATE KEY UPDATE seen_until = clock_now + INTERVAL seen_us MICROSECOND;
    SELECT %[4]s, clock_now FROM `+"`%[3]s`"+` WHERE name = lease_name;
END`, seenProcedure, candidatesTable, leasesTable, recordColumnsAt("clock_now"))

// routines are leaderrun's stored procedures, in the order Open creates
// them.
var routines = []routine{
	{name: fenceProcedure, what: "fence", version: 2, body: fenceSQL},
	{name: renewProcedure, what: "renew", version: 2, body: renewSQL},
	{name: seenProcedure, what: "candidate", version: 1, body: seenSQL},
}

// SchemaSQL returns the statements that create leaderrun's tables and
// procedures, for the mysql command-line client (each procedure is set off
// with DELIMITER). Open runs them when the objects are missing; an
// administrator can run them ahead of time in the database the DSN names,
// for a user that may not create objects, and then grant that user the
// privileges listed in the package documentation. Dropping a procedure
// drops the privileges granted on it: grant them again afterwards.
func SchemaSQL() string {
	var b strings.Builder
	for _, t := range tables {
		b.WriteString(t.createSQL())
		b.WriteString(";\n\n")
	}
	for _, r := range routines {
		fmt.Fprintf(&b, "DROP PROCEDURE IF EXISTS `%s`;\nDELIMITER //\n%s//\nDELIMITER ;\n\n", r.name, r.createSQL())
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// schemaState is what exists of leaderrun's objects in the database.
type schemaState struct {
	columns  map[string][]string // table → its columns
	engines  map[string]string   // table → its storage engine
	routines map[string]string   // procedure → its comment, which names its version
	// mariadb: the server is MariaDB, which replaces a procedure in one
	// statement (CREATE OR REPLACE) and keeps the privileges granted on it.
	mariadb bool
}

// current reports whether every object exists as this version needs it: a
// procedure of this version or a later one.
func (st schemaState) current() bool {
	for _, t := range tables {
		for _, c := range t.columns {
			if !slices.Contains(st.columns[t.name], c.name) {
				return false
			}
		}
	}
	for _, r := range routines {
		if !st.routineCurrent(r) {
			return false
		}
	}
	return true
}

// routineCurrent reports whether r exists in its version or a later one.
func (st schemaState) routineCurrent(r routine) bool {
	comment, ok := st.routines[r.name]
	if !ok {
		return false
	}
	v, ok := r.routineVersion(comment)
	return ok && v >= r.version
}

// foreign returns an error for a table of one of leaderrun's names that
// leaderrun did not create: it lacks an identifying column or is not
// InnoDB; and for a procedure of fence's name that no version of leaderrun
// created. Such objects are never altered.
func (st schemaState) foreign() error {
	for _, r := range routines {
		comment, ok := st.routines[r.name]
		if _, ours := r.routineVersion(comment); ok && !ours {
			return fmt.Errorf("procedure %s exists but is not leaderrun's; leaderrun will not replace it: "+
				"drop or rename it, or use another database", r.name)
		}
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
	for _, r := range routines {
		_, exists := st.routines[r.name]
		switch {
		case st.routineCurrent(r):
		case exists && st.mariadb:
			// One statement: a caller never finds the procedure missing,
			// and the privileges granted on it stay.
			out = append(out, strings.Replace(r.createSQL(), "CREATE PROCEDURE", "CREATE OR REPLACE PROCEDURE", 1))
		default:
			// MySQL has no CREATE OR REPLACE PROCEDURE; DROP drops the
			// privileges granted on it (see SchemaSQL).
			out = append(out, "DROP PROCEDURE IF EXISTS `"+r.name+"`", r.createSQL())
		}
	}
	return out
}

// readSchema reads which of leaderrun's objects exist in the connection's
// database.
func readSchema(ctx context.Context, conn *sql.Conn) (schemaState, error) {
	st := schemaState{columns: map[string][]string{}, engines: map[string]string{}, routines: map[string]string{}}
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
	procs := make([]any, len(routines))
	for i, r := range routines {
		procs[i] = r.name
	}
	rows, err = conn.QueryContext(ctx, `SELECT ROUTINE_NAME, ROUTINE_COMMENT FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME IN (`+placeholders(len(procs))+`)`, procs...)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			return st, err
		}
		st.routines[name] = comment
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return st, err
	}
	st.mariadb = strings.Contains(strings.ToLower(version), "mariadb")
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
