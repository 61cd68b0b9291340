package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
)

// permanent reports whether no retry can fix err: the server refused the
// login, the database does not exist, the role lacks a privilege, or the
// session is read-only. A connection that was refused, timed out or could
// not resolve its host is not permanent: the server may come back.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "28"): // invalid authorization (password, role, pg_hba)
		return true
	case pgErr.Code == "3D000": // invalid_catalog_name: no such database
		return true
	case pgErr.Code == "42501": // insufficient_privilege
		return true
	case pgErr.Code == "25006": // read_only_sql_transaction
		return true
	case pgErr.Code == "42704", pgErr.Code == "22023": // unknown or bad parameter in the DSN
		return true
	case pgErr.Code == "22003": // numeric_value_out_of_range: a token at the bigint maximum
		return true
	}
	return false
}

// missingObject reports whether err says that a schema, table or function
// leaderrun uses does not exist.
func missingObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "3F000", "42P01", "42883": // invalid_schema_name, undefined_table, undefined_function
		return true
	}
	return false
}

// connUsable reports whether a connection can serve another statement after
// a statement ended with err: it can after success and after an ordinary
// server error, not after a network error, a timeout or a fatal error.
func connUsable(err error) bool {
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC"
}

// errorPolicy is how this store's errors are reported (lease.ErrorPolicy).
var errorPolicy = lease.ErrorPolicy{Permanent: permanent, Hint: hintFor}

// wrapError adds op as context to err, marks it lease.ErrRefused when no
// retry can fix it, and scrubs secrets from its text (lease.ErrorPolicy.Wrap).
// A statement that gave up at lock_timeout reports lease.ErrLocked.
func wrapError(op string, err error, secrets []string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout passed
		return fmt.Errorf("%s: %w (%s)", op, lease.ErrLocked, lease.Scrub(pgErr.Message, secrets))
	}
	return errorPolicy.Wrap(op, err, secrets)
}

// hintFor says what to do about a permanent error, where that is not
// obvious from the server's message.
func hintFor(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	switch pgErr.Code {
	case "42501":
		return "the role needs the privileges listed in the lease/postgres documentation, or create the schema ahead of time with postgres.SchemaSQL"
	case "25006":
		return "the server or session is read-only; point the DSN at the primary, e.g. with target_session_attrs=read-write"
	case "22003":
		return "the lease's token is at the largest value a bigint holds: the record was tampered with; delete it, and tokens go on from the clock"
	}
	return ""
}
