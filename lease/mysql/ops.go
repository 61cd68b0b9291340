package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// recordColumns are the columns a lease row is read with, in scanRecord's
// order; remaining and reserved are computed by the server from its clock.
var recordColumns = recordColumnsAt("UTC_TIMESTAMP(6)")

// recordColumnsAt is recordColumns with remaining and reserved computed
// from now, an SQL expression for the server's clock.
func recordColumnsAt(now string) string {
	return `name, holder, token, acquired_at, renewed_at, expires_at, released,
	TIMESTAMPDIFF(MICROSECOND, ` + now + `, expires_at),
	step_down, successor, excluded_holder,
	IFNULL(TIMESTAMPDIFF(MICROSECOND, ` + now + `, reserved_until), 0),
	location, version`
}

// row is what scanRecord reads from.
type row interface{ Scan(dest ...any) error }

// scanRecord scans recordColumns, followed by extra destinations.
func scanRecord(r row, extra ...any) (lease.Record, int64, error) {
	var (
		rec                     lease.Record
		remainingUS, reservedUS int64
		version                 int64
	)
	dest := append([]any{&rec.Name, &rec.Holder, &rec.Token, &rec.Acquired, &rec.Renewed, &rec.Expires,
		&rec.Released, &remainingUS, &rec.StepDown, &rec.Successor, &rec.Excluded, &reservedUS,
		&rec.Where, &version}, extra...)
	if err := r.Scan(dest...); err != nil {
		return lease.Record{}, 0, err
	}
	rec.Remaining = time.Duration(remainingUS) * time.Microsecond
	rec.Reserved = time.Duration(reservedUS) * time.Microsecond
	return rec, version, nil
}

// groupOf is the group whose version a change of name must raise: its
// group when name is a partition's lease, and nil (no group) otherwise.
func groupOf(name string) any {
	if group, _, ok := lease.SplitPartitionKey(name); ok {
		return group
	}
	return nil
}

// The statements of a grant.
var (
	// lockLease locks the lease row for the rest of the transaction and
	// reads it with the server's clock.
	lockLease = "SELECT " + recordColumns + ", UTC_TIMESTAMP(6) FROM `" + leasesTable + "` WHERE name = ? FOR UPDATE"
	// serverNow reads the server's clock when there is no row to lock.
	serverNow = "SELECT UTC_TIMESTAMP(6)"
	// raiseToken sets the name's last token to max(last + 1, floor, clock
	// in ms) and returns it as the statement's LAST_INSERT_ID. Its
	// exclusive lock on the tokens row waits for every transaction that
	// passed fence with the previous token.
	raiseToken = "INSERT INTO `" + tokensTable + "` (name, token) VALUES (?, LAST_INSERT_ID(GREATEST(?, ?))) " +
		"ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, ?, ?))"
	insertLease = "INSERT INTO `" + leasesTable + "` (name, holder, token, acquired_at, renewed_at, expires_at, version) " +
		"VALUES (?, ?, ?, ?, ?, ? + INTERVAL ? MICROSECOND, 1)"
	updateLease = "UPDATE `" + leasesTable + "` SET holder = ?, token = ?, acquired_at = ?, renewed_at = ?, " +
		"expires_at = ? + INTERVAL ? MICROSECOND, released = FALSE, step_down = FALSE, successor = '', " +
		"excluded_holder = '', reserved_until = NULL, location = '', version = version + 1 WHERE name = ?"
	raiseGroup = "UPDATE `" + groupsTable + "` SET version = version + 1 WHERE name = ?"
	// seeCandidate records a refused holder as a candidate until now +
	// 2×ttl.
	seeCandidate = "INSERT INTO `" + candidatesTable + "` (name, holder, seen_until) VALUES (?, ?, ? + INTERVAL ? MICROSECOND) " +
		"ON DUPLICATE KEY UPDATE seen_until = ? + INTERVAL ? MICROSECOND"
)

// Acquire grants name to holder for ttl when the row is absent, released or
// expired by the server's clock and no step-down reservation keeps holder
// out. It first calls the candidate procedure, which records holder as a
// candidate (seen until now + 2×ttl) and reads the row in one statement;
// a row that keeps holder out is refused from that read. Otherwise a
// transaction grants it: it locks the lease row (SELECT … FOR UPDATE),
// decides again, raises the name's token in the tokens table (token =
// max(previous + 1, server clock in milliseconds)), writes the row and
// raises the version waiters poll. Before committing, it takes the
// tenure's wake-up lock on this store's lock session, which it opens, if
// it is not yet, while the transaction starts. A refused Acquire
// records holder as a candidate, seen until now + 2×ttl, and returns a
// *lease.HeldError with the row as the server read it, Remaining being the
// time until the name may be free for holder. A statement whose outcome is
// unknown returns an error.
//
// While a child's transaction holds fence on the name, a granting Acquire
// waits for it to end, up to innodb_lock_wait_timeout (5 s), then fails
// and is retried by the caller; a refused one does not wait.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if err := validLease(name, holder, ttl); err != nil {
		return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, s.wrap(fmt.Sprintf("acquire lease %q", name), err)
	}
	// A follower's Acquire is most often refused: one CALL records it as a
	// candidate and reads the row, and refuses when the row keeps holder
	// out. Only a name that looked free is granted by the transaction.
	var (
		cur lease.Record
		now time.Time
	)
	err := s.callRow(ctx, func(r row) (err error) {
		cur, _, err = scanRecord(r, &now)
		return err
	}, "CALL `"+seenProcedure+"`(?, ?, ?)", name, holder, micros(2*ttl))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return lease.Record{}, s.wrap(fmt.Sprintf("acquire lease %q", name), err)
	}
	if refusal := lease.Refusal(cur, holder, nil); refusal != nil {
		return lease.Record{}, refusal
	}
	return s.grant(ctx, "acquire", name, holder, nil, ttl)
}

// Seize is Acquire that also takes the name over from the tenure dead while
// the row still names it and it is not released, expired or not.
func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "seize", name, holder, &dead, ttl)
}

func (s *Store) grant(ctx context.Context, op, name, holder string, dead *lease.Record, ttl time.Duration) (lease.Record, error) {
	op = fmt.Sprintf("%s lease %q", op, name)
	if err := validLease(name, holder, ttl); err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		rec     lease.Record
		refusal error
	)
	s.locks.warm()
	err := s.inTx(ctx, func(r runner) error {
		rec, refusal = lease.Record{}, nil
		var now time.Time
		cur, _, err := scanRecord(r.queryRow(ctx, lockLease, name), &now)
		found := err == nil
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := r.queryRow(ctx, serverNow).Scan(&now); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if refusal = lease.Refusal(cur, holder, dead); refusal != nil {
			_, err := r.exec(ctx, seeCandidate, name, holder, now, micros(2*ttl), now, micros(2*ttl))
			return err
		}
		floor := int64(1)
		if found {
			floor = cur.Token + 1
		}
		res, err := r.exec(ctx, raiseToken, name, floor, now.UnixMilli(), floor, now.UnixMilli())
		if err != nil {
			return err
		}
		token, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if found {
			_, err = r.exec(ctx, updateLease, holder, token, now, now, now, micros(ttl), name)
		} else {
			_, err = r.exec(ctx, insertLease, name, holder, token, now, now, now, micros(ttl))
		}
		if err != nil {
			return err
		}
		if group := groupOf(name); group != nil {
			if _, err := r.exec(ctx, raiseGroup, group); err != nil {
				return err
			}
		}
		rec = lease.Record{Name: name, Holder: holder, Token: token, Acquired: now, Renewed: now,
			Expires: now.Add(ttl), Remaining: ttl}
		s.locks.take(name, token)
		return nil
	})
	switch {
	case err != nil:
		if rec.Token != 0 {
			s.locks.drop(name, rec.Token)
		}
		return lease.Record{}, s.wrap(op, err)
	case refusal != nil:
		return lease.Record{}, refusal
	}
	return rec, nil
}

// validLease checks what a grant writes.
func validLease(name, holder string, ttl time.Duration) error {
	switch {
	case ttl <= 0:
		return errTTL
	case name == "":
		return refused(errors.New("empty lease name"))
	case holder == "":
		return refused(errors.New("empty holder"))
	}
	if err := checkLen("lease name", name, maxNameLen); err != nil {
		return err
	}
	return checkLen("holder", holder, maxNameLen)
}

// Renew extends the lease to ttl from the server's now if holder still
// holds name with token and it has not expired; otherwise it returns
// lease.ErrLost. It is one statement and one round trip: a CALL of the
// renew procedure, which runs, in one transaction, an UPDATE guarded by
// holder, token, not released and not expired, and a SELECT of the row it
// wrote (MySQL has no UPDATE … RETURNING). It raises no version and does
// not wake waiters. A statement whose outcome is unknown returns an error,
// never the record.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("renew lease %q", name)
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, s.wrap(op, err)
	}
	var rec lease.Record
	err := s.callRow(ctx, func(r row) (err error) {
		rec, _, err = scanRecord(r)
		return err
	}, "CALL `"+renewProcedure+"`(?, ?, ?, ?)", name, holder, token, micros(ttl))
	if errors.Is(err, sql.ErrNoRows) {
		err = lease.ErrLost
	}
	if errors.Is(err, lease.ErrLost) {
		s.locks.drop(name, token)
	}
	if err != nil {
		return lease.Record{}, s.wrap(op, err)
	}
	return rec, nil
}

// callRow runs the CALL q, scans its first row, if any, with scan, and
// reads the rest of the reply, so that an error the procedure raised after
// its SELECT (a failed COMMIT) is reported. It returns sql.ErrNoRows when
// the procedure returned no row.
func (s *Store) callRow(ctx context.Context, scan func(row) error, q string, args ...any) error {
	rows, err := s.auto().query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	found := false
	if rows.Next() {
		found = true
		if err := scan(rows); err != nil {
			return err
		}
	}
	for rows.Next() || rows.NextResultSet() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if !found {
		return sql.ErrNoRows
	}
	return nil
}

// changeHeld runs one UPDATE of name's row, with set as its assignments,
// if holder holds it with token and it has not expired; it raises the
// row's version and, for a partition, its group's, in the same statement.
// It returns lease.ErrLost when the row did not qualify.
func (s *Store) changeHeld(ctx context.Context, name, holder string, token int64, set string, args ...any) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	q := "UPDATE `" + leasesTable + "` l LEFT JOIN `" + groupsTable + "` g ON g.name = ? SET " + set +
		", l.version = l.version + 1, g.version = g.version + 1 " +
		"WHERE l.name = ? AND l.holder = ? AND l.token = ? AND NOT l.released AND l.expires_at > UTC_TIMESTAMP(6)"
	all := append(append([]any{groupOf(name)}, args...), name, holder, token)
	for attempt := 1; ; attempt++ {
		n, err := affected(s.auto().exec(ctx, q, all...))
		switch {
		case serverError(err, erLockDeadlock) && attempt < txAttempts:
			// It may lock the group's row before the lease's, the
			// order grants take them in reverse; InnoDB rolled it back.
			continue
		case err != nil:
			return err
		case n == 0:
			return lease.ErrLost
		}
		return nil
	}
}

// Annotate sets the row's location if holder holds name with token and it
// has not expired, in one UPDATE that raises the version, and moves the
// tenure to the wake-up lock of its new Where: it takes the new lock
// before the UPDATE commits (so that a waiter that reads the new Where
// finds its lock held) and releases the old one after, which wakes the
// waiters blocked on the old one at once.
func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	op := fmt.Sprintf("annotate lease %q", name)
	if err := checkLen("where", where, maxWhereLen); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.locks.prepare(name, token, where)
	err := s.changeHeld(ctx, name, holder, token, "l.location = ?", where)
	switch {
	case err == nil:
		s.locks.rekey(name, token, where)
	case errors.Is(err, lease.ErrLost):
		s.locks.drop(name, token)
	default:
		s.locks.unprepare(name, token, where)
	}
	return s.wrap(op, err)
}

// Release marks name released if holder holds it with token and it has not
// expired, in one UPDATE that raises the version waiters poll, and then
// releases the tenure's wake-up lock, which wakes the waiters blocked on it
// at once. Otherwise it returns lease.ErrLost and changes nothing.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	err := s.changeHeld(ctx, name, holder, token, "l.released = TRUE")
	if err == nil || errors.Is(err, lease.ErrLost) {
		s.locks.drop(name, token)
	}
	return s.wrap(fmt.Sprintf("release lease %q", name), err)
}

// RequestStepDown sets the step-down flag and the reservation in one
// transaction: it locks the lease row, checks that it is held, not by
// successor, and that successor is a live candidate or, for a partition, a
// live member of its group, then updates it and raises the version waiters
// poll. Waiters blocked on the tenure's lock learn of it within
// lockPollInterval; the holder learns of it from its next Renew.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("step down lease %q", name)
	if window <= 0 {
		return lease.Record{}, fmt.Errorf("%s: window must be positive", op)
	}
	if err := checkLen("successor", successor, maxNameLen); err != nil {
		return lease.Record{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		rec     lease.Record
		refusal error
	)
	err := s.inTx(ctx, func(r runner) error {
		rec, refusal = lease.Record{}, nil
		var now time.Time
		cur, _, err := scanRecord(r.queryRow(ctx, lockLease, name), &now)
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if !found || !cur.Held() || cur.Holder == successor {
			refusal = lease.StepDownRefusal(cur, found, successor)
			return nil
		}
		if successor != "" {
			live, err := liveSuccessor(ctx, r, name, successor, now)
			if err != nil {
				return err
			}
			if !live {
				refusal = lease.StepDownRefusal(cur, found, successor)
				return nil
			}
		}
		excluded := ""
		if successor == "" {
			excluded = cur.Holder
		}
		if _, err := r.exec(ctx, "UPDATE `"+leasesTable+"` SET step_down = TRUE, successor = ?, excluded_holder = ?, "+
			"reserved_until = ? + INTERVAL ? MICROSECOND, version = version + 1 WHERE name = ?",
			successor, excluded, now, micros(window), name); err != nil {
			return err
		}
		if group := groupOf(name); group != nil {
			if _, err := r.exec(ctx, raiseGroup, group); err != nil {
				return err
			}
		}
		rec = cur
		rec.StepDown, rec.Successor, rec.Excluded, rec.Reserved = true, successor, excluded, window
		return nil
	})
	switch {
	case err != nil:
		return lease.Record{}, s.wrap(op, err)
	case refusal != nil:
		return lease.Record{}, fmt.Errorf("%s: %w", op, refusal)
	}
	s.ring(ctx, name, rec.Token)
	return rec, nil
}

// ring interrupts the Wait that the holder of name's tenure token keeps on
// its own tenure, if it is blocked: the session that holds the tenure's
// bell lock. Best effort: a failure leaves the holder to learn of the
// change from its next renewal.
func (s *Store) ring(ctx context.Context, name string, token int64) {
	var id sql.NullInt64
	if err := s.auto().queryRow(ctx, "SELECT IS_USED_LOCK(?)", bellLock(s.dbName, name, token)).Scan(&id); err != nil || !id.Valid {
		return
	}
	s.auto().exec(ctx, fmt.Sprintf("KILL QUERY %d", id.Int64))
}

// liveSuccessor reports, inside the caller's transaction on r, whether
// successor is a live candidate for name at now or, when name is a
// partition, a live member of its group.
func liveSuccessor(ctx context.Context, r runner, name, successor string, now time.Time) (bool, error) {
	q := "SELECT 1 FROM `" + candidatesTable + "` WHERE name = ? AND holder = ? AND seen_until > ?"
	args := []any{name, successor, now}
	if group := groupOf(name); group != nil {
		q += " UNION ALL SELECT 1 FROM `" + membersTable + "` WHERE grp = ? AND member = ? AND expires_at > ?"
		args = append(args, group, successor, now)
	}
	var one int
	err := r.queryRow(ctx, q+" LIMIT 1", args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Get returns name's record, or lease.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	rec, _, err := s.readLease(ctx, name)
	return rec, s.wrap(fmt.Sprintf("get lease %q", name), err)
}

// readLease reads name's record and version, or lease.ErrNotFound.
func (s *Store) readLease(ctx context.Context, name string) (lease.Record, int64, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, 0, err
	}
	rec, version, err := scanRecord(s.auto().queryRow(ctx, "SELECT "+recordColumns+" FROM `"+leasesTable+"` WHERE name = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Record{}, 0, lease.ErrNotFound
	}
	return rec, version, err
}

// List returns every record, ordered by name bytewise (names are binary
// strings).
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	recs, err := s.list(ctx)
	if err != nil {
		return nil, s.wrap("list leases", err)
	}
	return recs, nil
}

func (s *Store) list(ctx context.Context) ([]lease.Record, error) {
	rows, err := s.auto().query(ctx, "SELECT "+recordColumns+" FROM `"+leasesTable+"` ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var recs []lease.Record
	for rows.Next() {
		rec, _, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}
