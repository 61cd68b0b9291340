package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaderrun/leaderrun/lease"
)

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

// grantSQL inserts the row for ?1 or takes it over when it was released,
// has expired, was written during another boot, or (Seize) still names the
// proved-dead holder ?7 with token ?8 — unless a step-down reservation of
// this boot keeps holder ?2 out. It returns no row when the name is not
// free for ?2. Acquire passes ” and 0 for ?7 and ?8, which no row has.
const grantSQL = `INSERT INTO leases (` + columns + `)
VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, 0, 0, '', '', 0, '')
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
	reserved_ms = 0,
	location = ''
WHERE (leases.released
		OR leases.boot_id <> excluded.boot_id
		OR leases.expires_ms <= excluded.acquired_ms
		OR (leases.holder = ?7 AND leases.token = ?8))
	AND (leases.boot_id <> excluded.boot_id
		OR leases.reserved_ms <= excluded.acquired_ms
		OR (leases.successor <> '' AND leases.successor = excluded.holder)
		OR (leases.successor = '' AND leases.excluded_holder <> excluded.holder))
RETURNING ` + columns

// getSQL reads the record of name ?1.
const getSQL = `SELECT ` + columns + ` FROM leases WHERE name = ?1`

// candidateSQL records holder ?2 as a candidate for name ?1, seen until
// ?4 under boot id ?3, keeping what it said of itself (lease.SeeAgain): a
// new candidate has the zero Candidacy. An ineligibility written during
// another boot has ended.
const candidateSQL = `INSERT INTO candidates (name, holder, boot_id, seen_ms)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name, holder) DO UPDATE SET
	ineligible_ms = CASE WHEN candidates.boot_id = excluded.boot_id THEN candidates.ineligible_ms ELSE 0 END,
	boot_id = excluded.boot_id,
	seen_ms = excluded.seen_ms`

// stepDownSQL marks the tenure of name ?1 as asked to step down and
// reserves the name until ?5 for successor ?2 or, when ?2 is empty,
// against the holder, if the name is held at store time ?4 under boot id
// ?3 by someone other than ?2, and ?2 is empty, a live candidate or a live
// member of group ?6 (the name's group when it is a partition; empty,
// which no group's name is, for any other name).
const stepDownSQL = `UPDATE leases SET
	step_down = 1,
	successor = ?2,
	excluded_holder = CASE WHEN ?2 = '' THEN holder ELSE '' END,
	reserved_ms = ?5
WHERE name = ?1 AND boot_id = ?3 AND NOT released AND expires_ms > ?4 AND holder <> ?2
	AND (?2 = ''
		OR EXISTS (SELECT 1 FROM candidates AS c
			WHERE c.name = ?1 AND c.holder = ?2 AND c.boot_id = ?3 AND c.seen_ms > ?4)
		OR (?6 <> '' AND EXISTS (SELECT 1 FROM members AS m
			WHERE m.grp = ?6 AND m.member = ?2 AND m.boot_id = ?3 AND m.expires_ms > ?4)))
RETURNING ` + columns

// heldSQL is the condition under which holder ?2 holds name ?1 with token
// ?3 at store time ?5 under boot id ?4.
const heldSQL = `name = ?1 AND holder = ?2 AND token = ?3 AND boot_id = ?4
	AND NOT released AND expires_ms > ?5`

const renewSQL = `UPDATE leases SET renewed_ms = ?5, expires_ms = ?6
WHERE ` + heldSQL + `
RETURNING ` + columns

const annotateSQL = `UPDATE leases SET location = ?6
WHERE ` + heldSQL + `
RETURNING ` + columns

const releaseSQL = `UPDATE leases SET released = 1
WHERE ` + heldSQL + `
RETURNING ` + columns

// Acquire implements lease.Store. The token is max(previous+1, wall clock
// in milliseconds). If the name is held, also by holder itself, it returns
// a *lease.HeldError.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "acquire", name, holder, lease.Record{}, ttl)
}

// Seize implements lease.Store: Acquire, or a takeover of the tenure dead.
func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "seize", name, holder, dead, ttl)
}

func (s *Store) grant(ctx context.Context, op, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	op = fmt.Sprintf("%s lease %q", op, name)
	ttlMs, err := millis(ttl)
	if err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.fresh(ctx); err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	// The row may have been deleted or freed between a refused grant and
	// the read that describes the holder; the transaction rules that out,
	// but a step-down reservation may end meanwhile: try again then.
	for range 3 {
		now, err := s.clock.now()
		if err != nil {
			return lease.Record{}, fmt.Errorf("%s: %w", op, err)
		}
		var a attempt
		err = s.inTx(ctx, func(conn *sql.Conn) error {
			a, err = s.grantOnce(ctx, conn, name, holder, dead, now, ttlMs)
			return err
		})
		switch {
		case tokenOverflow(err):
			return lease.Record{}, fmt.Errorf("%s: %w", op, lease.Refused(errors.New(
				"the lease's token is at the largest value SQLite holds: the record was tampered with; delete it, and tokens go on from the clock")))
		case err != nil:
			return lease.Record{}, s.fail(op, err)
		case a.granted:
			s.wake()
			return s.recordAt(a.row, now), nil
		case !a.found:
			continue
		}
		if refusal := lease.Refusal(s.recordAt(a.row, now), holder, &dead); refusal != nil {
			if a.marked {
				s.noteCandidate(name, holder, now.millis(), ttlMs)
			}
			return lease.Record{}, refusal
		}
	}
	return lease.Record{}, fmt.Errorf("%s: it changed hands repeatedly during the attempt", op)
}

// tokenOverflow reports whether err is the grant's token+1 overflowing:
// SQLite turns the sum into a REAL, which the STRICT table refuses.
func tokenOverflow(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_DATATYPE
}

// attempt is the outcome of one grant transaction.
type attempt struct {
	granted bool // row is the new grant
	found   bool // row is the current record, which refused the grant
	marked  bool // the candidate mark was written
	row     row
}

// grantOnce is one grant attempt inside a transaction: the conditional
// upsert and, when the name is not free, the candidate mark and the read of
// the record that names the holder.
func (s *Store) grantOnce(ctx context.Context, conn *sql.Conn, name, holder string, dead lease.Record, now reading, ttlMs int64) (attempt, error) {
	rows, err := scanRows(ctx, conn, grantSQL, name, holder, now.wallMillis(), s.clock.bootID,
		now.millis(), now.millis()+ttlMs, dead.Holder, dead.Token)
	if err != nil {
		return attempt{}, err
	}
	if len(rows) == 1 {
		return attempt{granted: true, row: rows[0]}, nil
	}
	marked, err := s.markCandidate(ctx, conn, name, holder, now.millis(), ttlMs)
	if err != nil {
		return attempt{}, fmt.Errorf("record candidate: %w", err)
	}
	if rows, err = scanRows(ctx, conn, getSQL, name); err != nil {
		return attempt{}, err
	}
	if len(rows) == 0 {
		return attempt{}, nil
	}
	return attempt{found: true, marked: marked, row: rows[0]}, nil
}

// Renew implements lease.Store: ErrLost unless holder still holds name
// with token and the lease has not expired.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("renew lease %q", name)
	ttlMs, err := millis(ttl)
	if err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	rec, err := s.update(ctx, renewSQL, name, holder, token, func(now reading) any { return now.millis() + ttlMs })
	if err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	return rec, nil
}

// Annotate implements lease.Store.
func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	if _, err := s.update(ctx, annotateSQL, name, holder, token, func(reading) any { return where }); err != nil {
		return s.fail(fmt.Sprintf("annotate lease %q", name), err)
	}
	s.wake()
	return nil
}

// Release implements lease.Store: ErrLost unless holder still holds name
// with token and the lease has not expired. It wakes the waiters.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	if _, err := s.update(ctx, releaseSQL, name, holder, token, nil); err != nil {
		return s.fail(fmt.Sprintf("release lease %q", name), err)
	}
	s.wake()
	return nil
}

// update runs one of the statements guarded by heldSQL, with the value
// extra returns as ?6, and returns the updated record, or lease.ErrLost
// when it changed nothing.
func (s *Store) update(ctx context.Context, query, name, holder string, token int64, extra func(reading) any) (lease.Record, error) {
	if err := s.lostIfReplaced(); err != nil {
		return lease.Record{}, err
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Record{}, err
	}
	args := []any{name, holder, token, s.clock.bootID, now.millis()}
	if extra != nil {
		args = append(args, extra(now))
	}
	rows, err := s.queryRows(ctx, query, args...)
	if err != nil {
		return lease.Record{}, err
	}
	if len(rows) == 0 {
		return lease.Record{}, lease.ErrLost
	}
	return s.recordAt(rows[0], now), nil
}

// markCandidate marks holder as campaigning for name until now + 2×ttl,
// inside the caller's transaction on q, and reports whether it wrote. It
// writes only when the mark this Store wrote last has less than a ttl
// left, so a follower that wakes up often does not write each time;
// noteCandidate records a mark once its transaction committed.
func (s *Store) markCandidate(ctx context.Context, q querier, name, holder string, nowMs, ttlMs int64) (bool, error) {
	s.mu.Lock()
	fresh := nowMs < s.candidate[name+"\x00"+holder]-ttlMs
	s.mu.Unlock()
	if fresh {
		return false, nil
	}
	_, err := scanRows(ctx, q, candidateSQL, name, holder, s.clock.bootID, nowMs+2*ttlMs)
	return err == nil, err
}

func (s *Store) noteCandidate(name, holder string, nowMs, ttlMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.candidate == nil {
		s.candidate = make(map[string]int64)
	}
	s.candidate[name+"\x00"+holder] = nowMs + 2*ttlMs
}

// RequestStepDown implements lease.Store in one UPDATE; only when it
// changes nothing does a read find out why.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("step down lease %q", name)
	windowMs, err := millis(window)
	if err != nil {
		return lease.Record{}, fmt.Errorf("%s: window: %w", op, err)
	}
	if err := s.fresh(ctx); err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	group, _, _ := lease.SplitPartitionKey(name)
	rows, err := s.queryRows(ctx, stepDownSQL, name, successor, s.clock.bootID, now.millis(), now.millis()+windowMs, group)
	if err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	if len(rows) == 1 {
		s.wake()
		return s.recordAt(rows[0], now), nil
	}
	if rows, err = s.queryRows(ctx, getSQL, name); err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	var cur lease.Record
	if len(rows) == 1 {
		cur = s.recordAt(rows[0], now)
	}
	return lease.Record{}, fmt.Errorf("%s: %w", op, lease.StepDownRefusal(cur, len(rows) == 1, successor))
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	op := fmt.Sprintf("get lease %q", name)
	if err := s.fresh(ctx); err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	rows, err := s.queryRows(ctx, getSQL, name)
	if err != nil {
		return lease.Record{}, s.fail(op, err)
	}
	if len(rows) == 0 {
		return lease.Record{}, fmt.Errorf("%s: %w", op, lease.ErrNotFound)
	}
	rec, err := s.record(rows[0])
	if err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	return rec, nil
}

// List implements lease.Store.
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	if err := s.fresh(ctx); err != nil {
		return nil, s.fail("list leases", err)
	}
	rows, err := s.queryRows(ctx, `SELECT `+columns+` FROM leases ORDER BY name`)
	if err != nil {
		return nil, s.fail("list leases", err)
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
