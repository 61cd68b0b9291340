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
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
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
	db    *sql.DB // reads and single-statement writes; poolSize connections
	watch *watcher

	mu        sync.Mutex       // guards candidate and seen
	candidate map[string]int64 // name+"\x00"+holder → seen_ms last written
	seen      map[string]seen  // name → what the last refused acquire read
}

var _ lease.Store = (*Store)(nil)

// poolSize bounds the connections of a Store, besides the one Wait polls
// on. Writes serialize on the file's lock anyway.
const poolSize = 2

// Open opens the lease database at path, creating the file, its missing
// directories and the table as needed. A relative path is resolved against
// the working directory.
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
		return nil, fmt.Errorf("sqlite store %s: %w", path, refused(err))
	}
	if err := prepare(abs, opts.UnsafeAllowNetworkFS); err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", abs, refused(err))
	}
	db, err := openPool(abs, poolSize)
	if err != nil {
		return nil, fmt.Errorf("sqlite store %s: %w", abs, refused(err))
	}
	watchDB, err := openPool(abs, 1)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", abs, refused(err))
	}
	s := &Store{path: abs, clock: theClock(), db: db, watch: newWatcher(watchDB, abs+wakeSuffix)}
	if err := retryBusy(ctx, openBusyBudget, func() error { return s.createTable(ctx) }); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite store %s: %w", abs, classify(err))
	}
	return s, nil
}

const columns = `name, holder, token, boot_id, acquired_ms, renewed_ms, expires_ms, released,
	step_down, successor, excluded_holder, reserved_ms`

// The *_ms columns hold store-clock readings in milliseconds, comparable
// only with readings taken under the same boot_id. Rows are never deleted
// by the store.
//
// step_down, successor, excluded_holder and reserved_ms hold a step-down
// request and its reservation (reserved_ms 0: none); see
// lease.Store.RequestStepDown. A reservation written during another boot
// has ended.
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
	reserved_ms INTEGER NOT NULL DEFAULT 0
) STRICT`

// addedColumns are the leases columns added after the first release, with
// their definitions, so that an existing table is upgraded in place.
var addedColumns = [][2]string{
	{"step_down", "INTEGER NOT NULL DEFAULT 0"},
	{"successor", "TEXT NOT NULL DEFAULT ''"},
	{"excluded_holder", "TEXT NOT NULL DEFAULT ''"},
	{"reserved_ms", "INTEGER NOT NULL DEFAULT 0"},
}

// createCandidates is the table of holders that tried to acquire a name,
// each seen until seen_ms (store clock under boot_id): the identities a
// step-down may name as successor.
const createCandidates = `CREATE TABLE IF NOT EXISTS candidates (
	name    TEXT NOT NULL,
	holder  TEXT NOT NULL,
	boot_id TEXT NOT NULL,
	seen_ms INTEGER NOT NULL,
	PRIMARY KEY (name, holder)
) STRICT`

func (s *Store) createTable(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// BEGIN IMMEDIATE takes the write lock first, waiting up to
	// busyTimeout for it, so that concurrent openers queue instead of
	// failing to upgrade a read lock.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	if err := migrate(ctx, conn); err != nil {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("create table: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return fmt.Errorf("create table: %w", err)
	}
	// A table of that name from something else fails here, not later.
	if _, err := s.queryRows(ctx, `SELECT `+columns+` FROM leases LIMIT 0`); err != nil {
		return fmt.Errorf("check table: %w", err)
	}
	return nil
}

// migrate creates the tables, or adds what an older version's table lacks.
// It runs inside the caller's transaction.
func migrate(ctx context.Context, conn *sql.Conn) error {
	for _, q := range []string{createTable, createCandidates} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	have := map[string]bool{}
	rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info('leases')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			return err
		}
		have[col] = true
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	for _, c := range addedColumns {
		if have[c[0]] {
			continue
		}
		if _, err := conn.ExecContext(ctx, `ALTER TABLE leases ADD COLUMN `+c[0]+` `+c[1]); err != nil {
			return err
		}
	}
	return nil
}

// About the clock readings below: each method reads the host clock
// immediately before its statement and passes the reading as a parameter.
// The statement runs some time after that reading, so "now" in the
// statement is early, never late. That errs on the safe side both ways: an
// expiry written as now+ttl is earlier than the true execution time plus
// ttl, so the holder's lease ends no later than it believes; and a row that
// expired between the reading and the execution still looks live, so a
// contender cannot take over early. A renewal may extend a lease that ran
// out in that gap, which is harmless: nobody else can have taken it, since
// writes serialize and a takeover would have changed the token. The same
// holds when a busy statement is run again with the same reading.

// acquireSQL inserts the row for ?1 or takes it over when it was released,
// has expired, or was written during another boot, unless a step-down
// reservation of this boot keeps holder ?2 out. It returns no row when the
// name is not free for ?2.
const acquireSQL = `INSERT INTO leases (` + columns + `)
VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, 0, 0, '', '', 0)
ON CONFLICT (name) DO UPDATE SET
	holder = excluded.holder,
	token = max(leases.token + 1, excluded.token),
	boot_id = excluded.boot_id,
	acquired_ms = excluded.acquired_ms,
	renewed_ms = excluded.renewed_ms,
	expires_ms = excluded.expires_ms,
	released = 0,
	step_down = 0,
	successor = '',
	excluded_holder = '',
	reserved_ms = 0
WHERE (leases.released
		OR leases.boot_id <> excluded.boot_id
		OR leases.expires_ms <= excluded.acquired_ms)
	AND (leases.boot_id <> excluded.boot_id
		OR leases.reserved_ms <= excluded.acquired_ms
		OR (leases.successor <> '' AND leases.successor = excluded.holder)
		OR (leases.successor = '' AND leases.excluded_holder <> excluded.holder))
RETURNING ` + columns

// getSQL reads the record of name ?1.
const getSQL = `SELECT ` + columns + ` FROM leases WHERE name = ?1`

// candidateSQL records holder ?2 as a candidate for name ?1, seen until
// ?4 under boot id ?3.
const candidateSQL = `INSERT INTO candidates (name, holder, boot_id, seen_ms)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name, holder) DO UPDATE SET boot_id = excluded.boot_id, seen_ms = excluded.seen_ms`

// stepDownSQL marks the tenure of name ?1 as asked to step down and
// reserves the name until ?5 for successor ?2 or, when ?2 is empty,
// against the holder, if the name is held at store time ?4 under boot id
// ?3 by someone other than ?2, and ?2 is empty or a live candidate.
const stepDownSQL = `UPDATE leases SET
	step_down = 1,
	successor = ?2,
	excluded_holder = CASE WHEN ?2 = '' THEN holder ELSE '' END,
	reserved_ms = ?5
WHERE name = ?1 AND boot_id = ?3 AND NOT released AND expires_ms > ?4 AND holder <> ?2
	AND (?2 = '' OR EXISTS (SELECT 1 FROM candidates AS c
		WHERE c.name = ?1 AND c.holder = ?2 AND c.boot_id = ?3 AND c.seen_ms > ?4))
RETURNING ` + columns

// heldSQL is the condition under which holder ?2 holds name ?1 with token
// ?3 at store time ?5 under boot id ?4.
const heldSQL = `name = ?1 AND holder = ?2 AND token = ?3 AND boot_id = ?4
	AND NOT released AND expires_ms > ?5`

const renewSQL = `UPDATE leases SET renewed_ms = ?5, expires_ms = ?6
WHERE ` + heldSQL + `
RETURNING ` + columns

const releaseSQL = `UPDATE leases SET released = 1
WHERE ` + heldSQL + `
RETURNING ` + columns

// Acquire implements lease.Store. The token is max(previous+1, wall clock
// in milliseconds). If the name is held, also by holder itself, it returns
// a *lease.HeldError.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	ttlMs, err := millis(ttl)
	if err != nil {
		return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	// The row may have been deleted between a refused grant and the read
	// that describes the holder; try again a few times then.
	for range 3 {
		now, err := s.clock.now()
		if err != nil {
			return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, err)
		}
		gen, watching := s.watch.generation()
		var a attempt
		err = retryBusy(ctx, busyTimeout, func() error {
			a, err = s.acquireOnce(ctx, name, holder, now, ttlMs)
			return err
		})
		switch {
		case err != nil:
			return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, err)
		case a.granted:
			s.wake()
			return s.recordAt(a.row, now), nil
		case !a.found:
			continue // deleted since
		}
		cur := s.recordAt(a.row, now)
		if watching {
			s.remember(name, ownerOf(cur), gen)
		}
		if wait := cur.Blocks(holder); wait > 0 {
			cur.Remaining = wait
			return lease.Record{}, &lease.HeldError{Record: cur}
		}
	}
	return lease.Record{}, fmt.Errorf("acquire lease %q: it changed hands repeatedly during the attempt", name)
}

// attempt is the outcome of one acquire transaction.
type attempt struct {
	granted bool // row is the new grant
	found   bool // row is the current record, which refused the grant
	row     row
}

// acquireOnce runs one acquire attempt as one BEGIN IMMEDIATE transaction:
// the conditional upsert and, when the name is not free, the candidate mark
// and the read of the record that names the holder. One transaction takes
// the database's locks once.
func (s *Store) acquireOnce(ctx context.Context, name, holder string, now reading, ttlMs int64) (a attempt, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return a, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return a, err
	}
	committed := false
	defer func() {
		if !committed {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	rows, err := scanRows(ctx, conn, acquireSQL, name, holder, now.wallMillis(), s.clock.bootID, now.millis(), now.millis()+ttlMs)
	if err != nil {
		return a, err
	}
	if len(rows) == 1 {
		a = attempt{granted: true, row: rows[0]}
	} else {
		if err := s.markCandidate(ctx, conn, name, holder, now.millis(), ttlMs); err != nil {
			return a, fmt.Errorf("record candidate: %w", err)
		}
		if rows, err = scanRows(ctx, conn, getSQL, name); err != nil {
			return a, err
		}
		if len(rows) == 1 {
			a = attempt{found: true, row: rows[0]}
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return attempt{}, err
	}
	committed = true
	if a.found {
		s.noteCandidate(name, holder, now.millis(), ttlMs)
	}
	return a, nil
}

// Renew implements lease.Store: ErrLost unless holder still holds name
// with token.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	ttlMs, err := millis(ttl)
	if err != nil {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, err)
	}
	rows, err := s.queryRows(ctx, renewSQL, name, holder, token, s.clock.bootID, now.millis(), now.millis()+ttlMs)
	if err != nil {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, err)
	}
	if len(rows) == 0 {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, lease.ErrLost)
	}
	rec, err := s.record(rows[0])
	if err != nil {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, err)
	}
	return rec, nil
}

// Release implements lease.Store: ErrLost unless holder still holds name
// with token. Waiters notice within pollInterval.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	now, err := s.clock.now()
	if err != nil {
		return fmt.Errorf("release lease %q: %w", name, err)
	}
	rows, err := s.queryRows(ctx, releaseSQL, name, holder, token, s.clock.bootID, now.millis())
	if err != nil {
		return fmt.Errorf("release lease %q: %w", name, err)
	}
	if len(rows) == 0 {
		return fmt.Errorf("release lease %q: %w", name, lease.ErrLost)
	}
	s.wake()
	return nil
}

// markCandidate marks holder as campaigning for name until now + 2×ttl,
// inside the caller's transaction on q. It writes only when the mark this
// Store wrote last has less than a ttl left, so a follower that wakes up
// often does not write each time; noteCandidate records a mark once its
// transaction committed.
func (s *Store) markCandidate(ctx context.Context, q querier, name, holder string, nowMs, ttlMs int64) error {
	s.mu.Lock()
	fresh := nowMs < s.candidate[name+"\x00"+holder]-ttlMs
	s.mu.Unlock()
	if fresh {
		return nil
	}
	_, err := scanRows(ctx, q, candidateSQL, name, holder, s.clock.bootID, nowMs+2*ttlMs)
	return err
}

func (s *Store) noteCandidate(name, holder string, nowMs, ttlMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.candidate == nil {
		s.candidate = make(map[string]int64)
	}
	key := name + "\x00" + holder
	if seen := nowMs + 2*ttlMs; nowMs >= s.candidate[key]-ttlMs {
		s.candidate[key] = seen
	}
}

// RequestStepDown implements lease.Store in one UPDATE; only when it
// changes nothing does a read find out why.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	windowMs, err := millis(window)
	if err != nil {
		return lease.Record{}, fmt.Errorf("step down lease %q: window: %w", name, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Record{}, fmt.Errorf("step down lease %q: %w", name, err)
	}
	rows, err := s.queryRows(ctx, stepDownSQL, name, successor, s.clock.bootID, now.millis(), now.millis()+windowMs)
	if err != nil {
		return lease.Record{}, fmt.Errorf("step down lease %q: %w", name, err)
	}
	if len(rows) == 1 {
		s.wake()
		return s.recordAt(rows[0], now), nil
	}
	cur, err := s.Get(ctx, name)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		err = lease.ErrNotFound
	case err != nil:
	case !cur.Held():
		err = lease.ErrNotHeld
	case cur.Holder == successor:
		err = lease.ErrAlreadyLeader
	default:
		err = lease.ErrUnknownSuccessor
	}
	return lease.Record{}, fmt.Errorf("step down lease %q: %w", name, err)
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	rows, err := s.queryRows(ctx, getSQL, name)
	if err != nil {
		return lease.Record{}, fmt.Errorf("get lease %q: %w", name, err)
	}
	if len(rows) == 0 {
		return lease.Record{}, fmt.Errorf("get lease %q: %w", name, lease.ErrNotFound)
	}
	rec, err := s.record(rows[0])
	if err != nil {
		return lease.Record{}, fmt.Errorf("get lease %q: %w", name, err)
	}
	return rec, nil
}

// List implements lease.Store.
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	rows, err := s.queryRows(ctx, `SELECT `+columns+` FROM leases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	now, err := s.clock.now()
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	recs := make([]lease.Record, len(rows))
	for i, r := range rows {
		recs[i] = s.recordAt(r, now)
	}
	return recs, nil
}

// Describe implements lease.Store: "sqlite:" and the absolute path.
func (s *Store) Describe() string { return "sqlite:" + s.path }

// Close implements lease.Store. It ends Waits in progress (they return
// nil) and closes the database; it does not release leases.
func (s *Store) Close() error {
	return errors.Join(s.watch.close(), s.db.Close())
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
		StepDown: r.stepDown, Successor: r.successor, Excluded: r.excluded}
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
			&r.stepDown, &r.successor, &r.excluded, &r.reserved); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// millis converts a TTL to whole milliseconds, refusing less than one.
func millis(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("ttl %v is shorter than the store's 1ms resolution", ttl)
	}
	return ttl.Milliseconds(), nil
}

// refusedError is an error that retrying cannot fix.
type refusedError struct{ err error }

func (e *refusedError) Error() string   { return e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{e.err, lease.ErrRefused} }

func refused(err error) error {
	if errors.Is(err, lease.ErrRefused) {
		return err
	}
	return &refusedError{err}
}

// classify marks the SQLite errors that retrying cannot fix as refused.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
			sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_ERROR:
			return refused(err)
		}
	}
	return err
}
