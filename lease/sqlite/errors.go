package sqlite

import (
	"errors"

	"github.com/leaderrun/leaderrun/lease"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// classify marks the SQLite errors that retrying is not expected to fix as
// refused.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_ERROR:
			return lease.Refused(err)
		}
	}
	return err
}
