package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func init() {
	lease.RegisterStore(func(ctx context.Context, dsn string, opts lease.OpenOptions) (*Store, error) {
		return open(ctx, dsn, opts.Existing)
	}, schemes...)
}

// Store is a lease.Store in InnoDB tables of a MySQL or MariaDB database.
// Every operation is one statement or one transaction, timed by the
// server's clock. Its methods are safe for concurrent use.
type Store struct {
	describe string
	secrets  []string // scrubbed from every error's text
	dbName   string   // the DSN's database

	db     *sql.DB // statements
	waitDB *sql.DB // sessions that block in GET_LOCK for a Wait
	locks  *locker // the session that holds this store's tenures' locks
	poller *poller

	// waitSlots has one token per session blocked in GET_LOCK.
	waitSlots chan struct{}
	// statements counts the statements sent on db (transaction control
	// included), for tests and benchmarks.
	statements atomic.Int64

	life     context.Context // ends with Close; the store's goroutines run under it
	stopLife context.CancelFunc
	wg       sync.WaitGroup // counts the store's goroutines

	mu      sync.Mutex // guards closing and waits
	closing bool       // no goroutine starts once set
	waits   map[*lockWait]struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

var _ lease.Store = (*Store)(nil)

// Open connects to the MySQL or MariaDB server that dsn names and creates
// leaderrun's tables and fence procedure in its database unless they
// exist.
//
// dsn is a URL, mysql://user:password@host:port/database?param=value
// (mariadb:// is the same), with special characters in the password
// %-encoded. The parameters a DSN may set are the driver's tls, timeout,
// readTimeout, writeTimeout, allowCleartextPasswords,
// allowNativePasswords, allowOldPasswords, allowFallbackToPlaintext,
// compress, connectionAttributes and maxAllowedPacket; any other
// parameter, or one given twice, is refused.
//
// A malformed DSN, a refused login, an unknown database, a missing
// privilege and a read-only server are errors that wrap lease.ErrRefused;
// an unreachable server is a plain error, which a retry may fix. No error
// contains the password.
func Open(ctx context.Context, dsn string) (*Store, error) { return open(ctx, dsn, false) }

// open is Open; with existing, it creates nothing and fails with
// lease.ErrNoStore when leaderrun's tables are missing.
func open(ctx context.Context, dsn string, existing bool) (*Store, error) {
	d, err := parseDSN(dsn)
	if err != nil {
		return nil, refused(fmt.Errorf("open mysql store %s: %w", redact(dsn), err))
	}
	fail := func(err error) (*Store, error) {
		return nil, wrapError("open mysql store "+d.describe, err, d.secrets)
	}
	// Statements; the holder's lock session, which must end on the server
	// when the locker closes it (no idle pool); sessions blocked in
	// GET_LOCK.
	db, err := openDB(d.cfg, pool{maxOpen: maxConns, maxIdle: maxConns, ioTimeouts: true})
	if err != nil {
		return fail(refused(err))
	}
	lockDB, _ := openDB(d.cfg, pool{params: lockSessionParams})
	waitDB, _ := openDB(d.cfg, pool{maxOpen: maxLockWaiters, maxIdle: maxLockWaiters, withID: true})
	s := &Store{
		describe:  d.describe,
		secrets:   d.secrets,
		dbName:    d.cfg.DBName,
		db:        db,
		waitDB:    waitDB,
		locks:     newLocker(lockDB, d.cfg.DBName),
		waitSlots: make(chan struct{}, maxLockWaiters),
		waits:     map[*lockWait]struct{}{},
		closed:    make(chan struct{}),
	}
	s.life, s.stopLife = context.WithCancel(context.Background())
	s.poller = newPoller(s)
	if err := s.ensureSchema(ctx, existing); err != nil {
		s.Close()
		return fail(err)
	}
	return s, nil
}

// Describe returns the DSN without its password.
func (s *Store) Describe() string { return s.describe }

// Close ends Waits in progress (they return lease.ErrClosed), the poller
// and the lock session, which releases this store's wake-up locks (waiters
// elsewhere wake, read, and wait again: the leases themselves are not
// released). Later calls return errors wrapping lease.ErrClosed. It is safe
// to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		var blocked []int64
		for lw := range s.waits {
			if id := lw.connID.Load(); id != 0 {
				blocked = append(blocked, id)
			}
		}
		s.mu.Unlock()
		close(s.closed)
		s.killQueries(blocked)
		s.stopLife()
		s.locks.close()
		s.wg.Wait()
		s.db.Close()
		s.waitDB.Close()
		s.locks.db.Close()
	})
	return nil
}

// goroutine runs fn under the store's lifetime, unless the store is
// closing; Close waits for it.
func (s *Store) goroutine(fn func(ctx context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.life)
	}()
	return true
}

// wrap adds op as context to err; see wrapError.
func (s *Store) wrap(op string, err error) error {
	if errors.Is(err, lease.ErrClosed) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return wrapError(op, err, s.secrets)
}

// Statements reports how many statements the store has sent on its
// statement connections (START TRANSACTION and COMMIT included; not the
// wake-up sessions' GET_LOCK and RELEASE_LOCK), for benchmarks.
func (s *Store) Statements() int64 { return s.statements.Load() }

// queryer is what a runner sends statements through: the pool, or a
// transaction.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// runner sends statements and counts them.
type runner struct {
	q queryer
	n *atomic.Int64
}

func (r runner) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r.n.Add(1)
	return r.q.ExecContext(ctx, q, args...)
}

func (r runner) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.n.Add(1)
	return r.q.QueryContext(ctx, q, args...)
}

func (r runner) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	r.n.Add(1)
	return r.q.QueryRowContext(ctx, q, args...)
}

// affected is the number of rows res matched (the driver reports found
// rows, not changed ones).
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// auto runs single statements, each its own transaction.
func (s *Store) auto() runner { return runner{s.db, &s.statements} }

// txAttempts bounds how often a transaction is run again after InnoDB
// rolled it back for a deadlock, or after a first insert of a name lost a
// race to another.
const txAttempts = 4

// inTx runs fn in one READ COMMITTED transaction and commits it, unless fn
// returns an error (also a sentinel such as lease.ErrLost), which rolls it
// back. A transaction rolled back by a deadlock or a duplicate key is run
// again; a failed commit is not, because its outcome is unknown.
func (s *Store) inTx(ctx context.Context, fn func(r runner) error) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		s.statements.Add(1)
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		err = fn(runner{tx, &s.statements})
		if err == nil {
			s.statements.Add(1)
			return tx.Commit()
		}
		s.statements.Add(1)
		tx.Rollback()
		if attempt == txAttempts || !serverError(err, erLockDeadlock, erDupEntry) {
			return err
		}
	}
}

// errTTL is returned for a lease duration that is not positive.
var errTTL = errors.New("lease duration must be positive")

// refused marks err as one no retry can fix.
func refused(err error) error { return lease.Refused(err) }

// checkLen refuses a value longer than its column.
func checkLen(what, v string, limit int) error {
	if len(v) > limit {
		return refused(fmt.Errorf("%s %.20q…: longer than %d bytes", what, v, limit))
	}
	return nil
}

// micros is d in whole microseconds, at least 1.
func micros(d time.Duration) int64 { return max(d.Microseconds(), 1) }
