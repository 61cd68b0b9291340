package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Options tune Open. The zero value is the safe default.
type Options struct {
	// UnsafeAllowNetworkFS opens a database on a network filesystem (NFS,
	// SMB, 9p, Ceph, sshfs, …) instead of refusing it. It is unsafe: the
	// byte-range locks SQLite relies on are unreliable there, and the
	// processes sharing the file may be on hosts with different clocks and
	// boot ids, so two of them can hold one name at once.
	UnsafeAllowNetworkFS bool
}

// Store is a lease.Store in an SQLite file. Its methods are safe for
// concurrent use; any number of Stores, in any number of processes on one
// host, may share a file.
type Store struct {
	path  string
	clock hostClock
	db    *sql.DB // reads and writes; poolSize connections
	watch *watcher

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	mu        sync.Mutex       // guards candidate
	candidate map[string]int64 // name+"\x00"+holder → seen_ms last written
}

var _ lease.Store = (*Store)(nil)

// poolSize bounds the connections of a Store, besides the one Wait polls
// on. Writes serialize on the file's lock anyway.
const poolSize = 2

// Open opens the lease database at path, creating the file, its missing
// directories and the tables as needed. A relative path is resolved
// against the working directory.
//
// Errors that retrying cannot fix wrap lease.ErrRefused: an empty path, a
// path on a network filesystem (unless opts allow it), a directory or file
// that cannot be written, a database that is not one or whose pragmas do
// not take effect.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite store: empty path: %w", lease.ErrRefused)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", path, lease.Refused(err))
	}
	if err := prepare(abs, opts.UnsafeAllowNetworkFS); err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", abs, lease.Refused(err))
	}
	db, err := openPool(abs, poolSize)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", abs, lease.Refused(err))
	}
	watchDB, err := openPool(abs, 1)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", abs, lease.Refused(err))
	}
	s := &Store{path: abs, clock: theClock(), db: db, watch: newWatcher(watchDB, abs+wakeSuffix),
		closed: make(chan struct{})}
	if err := retryBusy(ctx, openBusyBudget, func() error { return s.createTables(ctx) }); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", abs, classify(err))
	}
	return s, nil
}

// Describe implements lease.Store: "sqlite:" and the absolute path.
func (s *Store) Describe() string { return "sqlite:" + s.path }

// Close implements lease.Store. It ends Waits in progress (they return
// lease.ErrClosed) and closes the database; it does not release leases.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = errors.Join(s.watch.close(), s.db.Close())
	})
	return err
}

// check returns lease.ErrClosed once the store is closed.
func (s *Store) check() error {
	select {
	case <-s.closed:
		return lease.ErrClosed
	default:
		return nil
	}
}

// fail wraps err for op, reporting lease.ErrClosed rather than the
// driver's error when the store was closed meanwhile.
func (s *Store) fail(op string, err error) error {
	if s.check() != nil {
		err = lease.ErrClosed
	}
	return fmt.Errorf("%s: %w", op, err)
}

// row is one row of the leases table.
type row struct {
	name, holder, bootID       string
	token                      int64
	acquired, renewed, expires int64
	released                   bool
	stepDown                   bool
	successor, excluded        string
	reserved                   int64
	location                   string
}

// record converts r to a lease.Record as of now.
func (s *Store) record(r row) (lease.Record, error) {
	now, err := s.clock.now()
	if err != nil {
		return lease.Record{}, err
	}
	return s.recordAt(r, now), nil
}

// recordAt converts r to a lease.Record as of the reading now.
func (s *Store) recordAt(r row, now reading) lease.Record {
	rec := lease.Record{Name: r.name, Holder: r.holder, Token: r.token, Released: r.released,
		StepDown: r.stepDown, Successor: r.successor, Excluded: r.excluded, Where: r.location}
	if r.bootID != s.clock.bootID {
		// Written during another boot: expired, and its times mean
		// nothing on this boot's clock.
		return rec
	}
	rec.Acquired = now.wallTime(r.acquired)
	rec.Renewed = now.wallTime(r.renewed)
	rec.Expires = now.wallTime(r.expires)
	rec.Remaining = now.until(r.expires)
	if r.reserved > 0 {
		rec.Reserved = now.until(r.reserved)
	}
	return rec
}

// queryRows runs a statement that returns lease rows and reads it to the
// end. A write statement has committed only once it has run to the end, so
// any error, a cancelled ctx included, means the outcome is unknown.
func (s *Store) queryRows(ctx context.Context, query string, args ...any) (rows []row, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	err = retryBusy(ctx, busyTimeout, func() error {
		rows, err = scanRows(ctx, s.db, query, args...)
		return err
	})
	return rows, err
}

// querier is a *sql.DB or a *sql.Conn in a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scanRows runs query on q and scans the records it returns.
func scanRows(ctx context.Context, q querier, query string, args ...any) ([]row, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.name, &r.holder, &r.token, &r.bootID, &r.acquired, &r.renewed, &r.expires, &r.released,
			&r.stepDown, &r.successor, &r.excluded, &r.reserved, &r.location); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// inTx runs fn in one BEGIN IMMEDIATE transaction on a connection of its
// own, and commits if fn succeeds. BEGIN IMMEDIATE takes the write lock
// first, so that the transaction's reads and writes see and change one
// state; a busy database is retried as a whole.
func (s *Store) inTx(ctx context.Context, fn func(conn *sql.Conn) error) error {
	if err := s.check(); err != nil {
		return err
	}
	return retryBusy(ctx, busyTimeout, func() error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		if err := fn(conn); err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
		return nil
	})
}

// millis converts a TTL to whole milliseconds, refusing less than one.
func millis(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("ttl %v is shorter than the store's 1ms resolution", ttl)
	}
	return ttl.Milliseconds(), nil
}
