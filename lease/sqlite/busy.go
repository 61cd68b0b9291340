package sqlite

import (
	"context"
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite returns SQLITE_BUSY without waiting out the busy timeout in a few
// cases: while another process runs WAL recovery, while the last
// connection of another process checkpoints and removes the WAL on close,
// and while a new database is switched to WAL mode. In WAL mode a
// statement that fails with SQLITE_BUSY has changed nothing (a commit
// needs no lock beyond the write lock the statement already holds), so it
// is safe to run it again.

// openBusyBudget bounds how long Open retries a busy database.
const openBusyBudget = 5 * time.Second

// retryBusy calls fn until it returns something other than a busy error,
// for at most budget (and while ctx lasts), and returns fn's last error.
func retryBusy(ctx context.Context, budget time.Duration, fn func() error) error {
	deadline := time.Now().Add(budget)
	delay := time.Millisecond
	for {
		err := fn()
		if !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED, in any of
// their extended forms.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
