package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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
	// Existing opens only a database that exists and holds leaderrun's
	// tables, and creates nothing (lease.OpenOptions.Existing).
	Existing bool
	// Logger receives the store's warnings (lease.OpenOptions.Logger):
	// a wake directory it does not use, and why. Nil discards them.
	Logger *slog.Logger
}

// Store is a lease.Store in an SQLite file. Its methods are safe for
// concurrent use; any number of Stores, in any number of processes on one
// host, may share a file.
type Store struct {
	path  string
	opts  Options
	clock hostClock

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	fileMu sync.RWMutex // guards file
	file   *dbFile      // the database file open now; replaced by reopen

	waker       waker     // runs wakeWaiters off the callers' paths
	wakeWarned  sync.Once // for warnWakeDir
	wakeStarted func()    // a test's hook: called as a wake-up pass starts

	mu        sync.Mutex       // guards candidate
	candidate map[string]int64 // name+"\x00"+holder → seen_ms last written
}

// dbFile is the database file a Store has open: its pools and which file
// (device and inode) the path named when they were opened.
type dbFile struct {
	db    *sql.DB // reads and writes; poolSize connections
	watch *watcher
	dev   uint64
	ino   uint64
	owner dbOwner // the file's owner, group and permissions when opened
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
	if err := prepare(abs, opts.UnsafeAllowNetworkFS, opts.Existing); err != nil {
		if errors.Is(err, lease.ErrNoStore) {
			return nil, fmt.Errorf("sqlite store %s: %w", abs, err)
		}
		return nil, fmt.Errorf("sqlite store %s: %w", abs, lease.Refused(err))
	}
	s := &Store{path: abs, opts: opts, clock: theClock(), closed: make(chan struct{})}
	s.waker.pass = s.wakeWaiters
	f, err := s.openFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", abs, err)
	}
	s.file = f
	return s, nil
}

// openFile opens the pools on the database at s.path, which prepare has
// checked, and creates or checks the tables.
func (s *Store) openFile(ctx context.Context) (*dbFile, error) {
	var st unix.Stat_t
	if err := unix.Stat(s.path, &st); err != nil {
		return nil, lease.Refused(err)
	}
	db, err := openPool(s.path, poolSize)
	if err != nil {
		return nil, lease.Refused(err)
	}
	watchDB, err := openPool(s.path, 1)
	if err != nil {
		db.Close()
		return nil, lease.Refused(err)
	}
	// The wake directory and its FIFOs take the database file's group
	// permissions: the users who may write the database may wake its
	// waiters.
	owner := ownerOf(&st)
	if !s.opts.Existing {
		makeWakeDir(s.path+wakeDirSuffix, owner)
	}
	f := &dbFile{db: db, watch: newWatcher(watchDB, s.path+wakeDirSuffix, owner, s.warnWakeDir),
		dev: st.Dev, ino: st.Ino, owner: owner}
	if err := retryBusy(ctx, openBusyBudget, func() error { return s.createTables(ctx, f.db) }); err != nil {
		f.close()
		if errors.Is(err, lease.ErrNoStore) {
			return nil, err
		}
		return nil, classify(err)
	}
	return f, nil
}

func (f *dbFile) close() error {
	return errors.Join(f.watch.close(), f.db.Close())
}

// db returns the pool of the database file open now.
func (s *Store) db() *sql.DB { return s.current().db }

func (s *Store) current() *dbFile {
	s.fileMu.RLock()
	defer s.fileMu.RUnlock()
	return s.file
}

// errReplaced says that the database file the Store has open is no longer
// the one its path names.
var errReplaced = errors.New("the database file was deleted or replaced since it was opened")

// replaced reports, with errReplaced, whether the path no longer names the
// file the Store has open: the file was deleted (and perhaps created anew
// by another process), or replaced. Then the Store's tenures cannot be
// trusted: other processes elect on the new file.
func (s *Store) replaced() error {
	f := s.current()
	var st unix.Stat_t
	if err := unix.Stat(s.path, &st); err != nil || st.Dev != f.dev || st.Ino != f.ino {
		return fmt.Errorf("%s: %w", s.path, errReplaced)
	}
	return nil
}

// lostIfReplaced is lease.ErrLost, explained, when the database file was
// replaced: a tenure granted in the old file means nothing in the new one.
func (s *Store) lostIfReplaced() error {
	if err := s.replaced(); err != nil {
		return fmt.Errorf("%w: %w", lease.ErrLost, err)
	}
	return nil
}

// fresh reopens the database when its file was replaced, so that the
// call that follows sees what the other processes see.
func (s *Store) fresh(ctx context.Context) error {
	if s.replaced() == nil {
		return nil
	}
	return s.reopen(ctx)
}

// reopen opens the file the path names now, if it is not the one open, and
// closes the old one; calls in flight on the old one fail.
func (s *Store) reopen(ctx context.Context) error {
	s.fileMu.Lock()
	if lease.IfClosed(s.closed) != nil {
		s.fileMu.Unlock()
		return lease.ErrClosed
	}
	old := s.file
	var st unix.Stat_t
	if unix.Stat(s.path, &st) == nil && st.Dev == old.dev && st.Ino == old.ino {
		s.fileMu.Unlock()
		return nil // another call reopened it first
	}
	if err := prepare(s.path, s.opts.UnsafeAllowNetworkFS, s.opts.Existing); err != nil {
		s.fileMu.Unlock()
		return err
	}
	f, err := s.openFile(ctx)
	if err != nil {
		s.fileMu.Unlock()
		return err
	}
	s.file = f
	s.fileMu.Unlock()
	old.close()
	return nil
}

// Describe implements lease.Store: "sqlite:" and the absolute path.
func (s *Store) Describe() string { return "sqlite:" + s.path }

// Close implements lease.Store. It ends Waits in progress (they return
// lease.ErrClosed), finishes the wake-ups that changes of hands asked for,
// and closes the database; it does not release leases.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.waker.stop()
		s.fileMu.Lock()
		defer s.fileMu.Unlock()
		err = s.file.close()
	})
	return err
}

// fail wraps err for op, reporting lease.ErrClosed rather than the
// driver's error when the store was closed meanwhile, who holds the
// write lock when the database stayed busy, and lease.ErrRefused for the
// errors retrying is not expected to fix (classify): a corrupt page of a
// table that Open did not read is refused at startup as a corrupt schema
// is, instead of being retried as an unavailable store.
func (s *Store) fail(op string, err error) error {
	if lease.IfClosed(s.closed) != nil {
		err = lease.ErrClosed
	}
	return fmt.Errorf("%s: %w", op, classify(s.busyError(err)))
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
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	err = s.recreating(ctx, func() error {
		return retryBusy(ctx, busyTimeout, func() error {
			rows, err = scanRows(ctx, s.db(), query, args...)
			return err
		})
	})
	return rows, err
}

// recreating runs fn, and once more after creating the tables again when fn
// failed because one of them is gone (dropped behind the store's back, as
// by an operator): tokens then go on from the clock. A store opened for an
// operator's command creates nothing.
func (s *Store) recreating(ctx context.Context, fn func() error) error {
	err := fn()
	var se *sqlite.Error
	if err == nil || s.opts.Existing || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_ERROR {
		return err
	}
	conn, cerr := s.db().Conn(ctx)
	if cerr != nil {
		return err
	}
	missing := false
	for table := range ownColumns {
		if cols, cerr := tableColumns(ctx, conn, table); cerr == nil && len(cols) == 0 {
			missing = true
		}
	}
	conn.Close()
	if !missing {
		return err
	}
	if cerr := retryBusy(ctx, openBusyBudget, func() error { return s.createTables(ctx, s.db()) }); cerr != nil {
		return fmt.Errorf("%w (and creating the tables again failed: %w)", err, cerr)
	}
	return fn()
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
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	return s.recreating(ctx, func() error { return s.tx(ctx, fn) })
}

// tx is inTx without recreating dropped tables.
func (s *Store) tx(ctx context.Context, fn func(conn *sql.Conn) error) error {
	return retryBusy(ctx, busyTimeout, func() error {
		conn, err := s.db().Conn(ctx)
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
