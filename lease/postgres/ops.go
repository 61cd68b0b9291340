package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
)

// recordColumns are the columns every statement returns, in scanRecord's
// order; remaining is computed by the database from its own clock.
var recordColumns = recordColumnsOf("")

// recordColumnsOf is recordColumns with each column prefixed by alias
// ("c.").
func recordColumnsOf(alias string) string {
	// Times are clamped to a century around now: a record tampered with
	// to hold 'infinity' must not break status for every name.
	return strings.NewReplacer("$.", alias).Replace(`$.name, $.holder, $.token,
	` + clamp("$.acquired_at") + `, ` + clamp("$.renewed_at") + `, ` + clamp("$.expires_at") + `, $.released,
	(extract(epoch FROM ` + clamp("$.expires_at") + ` - now()) * 1000000)::bigint AS remaining_us,
	$.step_down, $.successor, $.excluded_holder,
	coalesce((extract(epoch FROM ` + clamp("$.reserved_until") + ` - now()) * 1000000)::bigint, 0) AS reserved_us,
	$.location`)
}

// clamp keeps a timestamp column within a century of now; NULL stays NULL
// (greatest and least would skip it).
func clamp(col string) string {
	return "CASE WHEN " + col + " IS NULL THEN NULL ELSE least(greatest(" + col +
		", now() - interval '100 years'), now() + interval '100 years') END"
}

// acquireAttempts bounds how often Acquire retries when the name became
// free between a failed grant and the read that should name its holder.
const acquireAttempts = 3

// uniqueViolation reports whether err is a unique_violation.
func uniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

func scanRecord(row pgx.Row) (lease.Record, error) {
	var rec lease.Record
	var remainingUS, reservedUS int64
	err := row.Scan(&rec.Name, &rec.Holder, &rec.Token, &rec.Acquired, &rec.Renewed,
		&rec.Expires, &rec.Released, &remainingUS,
		&rec.StepDown, &rec.Successor, &rec.Excluded, &reservedUS, &rec.Where)
	rec.Remaining = time.Duration(remainingUS) * time.Microsecond
	rec.Reserved = time.Duration(reservedUS) * time.Microsecond
	return rec, err
}

// scanNullableRecord scans the destinations in prefix, then recordColumns
// that may all be NULL (no lease); ok reports whether they were not.
func scanNullableRecord(row pgx.Row, prefix ...any) (rec lease.Record, ok bool, err error) {
	var (
		name, holder, successor, excluded, where *string
		token, remainingUS, reservedUS           *int64
		acquired, renewed, expires               *time.Time
		released, stepDown                       *bool
	)
	dest := append(prefix, &name, &holder, &token, &acquired, &renewed, &expires, &released, &remainingUS,
		&stepDown, &successor, &excluded, &reservedUS, &where)
	if err := row.Scan(dest...); err != nil || name == nil {
		return lease.Record{}, false, err
	}
	rec = lease.Record{Name: *name, Holder: *holder, Token: *token, Acquired: *acquired, Renewed: *renewed,
		Expires: *expires, Released: *released, Remaining: time.Duration(*remainingUS) * time.Microsecond,
		StepDown: *stepDown, Successor: *successor, Excluded: *excluded, Where: *where}
	if reservedUS != nil {
		rec.Reserved = time.Duration(*reservedUS) * time.Microsecond
	}
	return rec, true, nil
}

// Acquire grants name to holder for ttl when the row is absent, released or
// expired by the database's clock and no step-down reservation keeps holder
// out, in one statement (an UPDATE of a free row, or an INSERT of a
// missing one), and notifies waiters. The same statement records holder as
// a candidate, seen until now + 2×ttl and keeping what it said of itself
// (lease.SeeAgain), when its record has less than 1.5×ttl left: a refused
// Acquire then writes and locks nothing.
// The new token is max(previous token + 1, database clock in
// milliseconds). If another holder, or holder itself, has the name, or a
// reservation keeps holder out, Acquire returns a *lease.HeldError with the
// row as the database reports it, Remaining being the time until the name
// may be free for holder. A statement whose outcome is unknown returns an
// error.
//
// While a child's transaction holds fence on a free name, Acquire waits
// for that transaction to end (up to ctx's deadline).
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "acquire", name, holder, lease.Record{}, ttl)
}

// Seize is Acquire that also takes the name over from the tenure dead while
// the row still names it, expired or not.
func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "seize", name, holder, dead, ttl)
}

func (s *Store) grant(ctx context.Context, op, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	op = fmt.Sprintf("%s lease %q", op, name)
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	q := fmt.Sprintf(`WITH seen AS (
	INSERT INTO %[3]s AS c (name, holder, seen_until)
	SELECT $1, $2, now() + 2 * $3::bigint * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT FROM %[3]s WHERE name = $1 AND holder = $2
		AND seen_until >= now() + 1.5 * $3::bigint * interval '1 microsecond')
	ON CONFLICT (name, holder) DO UPDATE SET seen_until = excluded.seen_until
), gone AS (
	DELETE FROM %[3]s WHERE name = $1 AND holder <> $2 AND seen_until < now()
), taken AS (
	UPDATE %[1]s AS l SET
		holder = $2,
		token = greatest(l.token + 1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
		acquired_at = now(),
		renewed_at = now(),
		expires_at = now() + $3::bigint * interval '1 microsecond',
		released = false,
		step_down = false,
		successor = '',
		excluded_holder = '',
		reserved_until = NULL,
		location = ''
	WHERE l.name = $1
		AND (l.released OR l.expires_at <= now() OR (l.holder = $5 AND l.token = $6))
		AND (l.reserved_until IS NULL OR l.reserved_until <= now()
			OR (l.successor <> '' AND l.successor = $2)
			OR (l.successor = '' AND l.excluded_holder <> $2))
	RETURNING l.*
), created AS (
	INSERT INTO %[1]s (name, holder, token, acquired_at, renewed_at, expires_at, released)
	SELECT $1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
		now(), now(), now() + $3::bigint * interval '1 microsecond', false
	WHERE NOT EXISTS (SELECT FROM %[1]s WHERE name = $1)
	ON CONFLICT (name) DO NOTHING
	RETURNING *
), granted AS (
	SELECT * FROM taken UNION ALL SELECT * FROM created
)
SELECT %[2]s FROM granted CROSS JOIN LATERAL pg_notify($4, granted.name) AS notified`, s.table, recordColumns, s.candidates)
	for range acquireAttempts {
		var rec lease.Record
		err := s.do(ctx, func(conn *pgx.Conn) error {
			var err error
			rec, err = scanRecord(conn.QueryRow(ctx, q, name, holder, ttl.Microseconds(), s.channel, dead.Holder, dead.Token))
			return err
		})
		if err == nil {
			return rec, nil
		}
		if uniqueViolation(err) {
			// Two first inserts of name computed the same clock token: the
			// UNIQUE (name, token) check, which ON CONFLICT (name) does not
			// arbitrate, refused the later one. Nothing was written; now
			// the row exists and the next attempt takes the ON CONFLICT path.
			continue
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return lease.Record{}, s.wrap(op, err)
		}
		cur, err := s.Get(ctx, name)
		switch {
		case err == nil:
			if refusal := lease.Refusal(cur, holder, &dead); refusal != nil {
				return lease.Record{}, refusal
			}
			continue // freed since the grant was refused: try again
		case errors.Is(err, lease.ErrNotFound):
			continue // deleted since
		default:
			return lease.Record{}, s.wrap(op, err)
		}
	}
	return lease.Record{}, fmt.Errorf("%s: the name changed hands %d times during the attempt", op, acquireAttempts)
}

// Renew extends the lease to ttl from the database's now if holder still
// holds name with token and it has not expired; otherwise it returns
// lease.ErrLost. It does not wake waiters. A statement whose outcome is
// unknown returns an error, never the record.
func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("renew lease %q: %w", name, errTTL)
	}
	q := fmt.Sprintf(`UPDATE %s
SET renewed_at = now(), expires_at = now() + $4::bigint * interval '1 microsecond'
WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released AND expires_at > now()
RETURNING %s`, s.table, recordColumns)
	var rec lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, q, name, holder, token, ttl.Microseconds()))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.Record{}, lease.ErrLost
	}
	if err != nil {
		return lease.Record{}, s.wrap(fmt.Sprintf("renew lease %q", name), err)
	}
	return rec, nil
}

// Annotate sets the row's location if holder holds name with token and it
// has not expired, and notifies waiters in the same statement.
func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	q := fmt.Sprintf(`WITH noted AS (
	UPDATE %s SET location = $5
	WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released AND expires_at > now()
	RETURNING name
)
SELECT noted.name FROM noted CROSS JOIN LATERAL pg_notify($4, noted.name) AS notified`, s.table)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var got string
		return conn.QueryRow(ctx, q, name, holder, token, s.channel, where).Scan(&got)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.ErrLost
	}
	return s.wrap(fmt.Sprintf("annotate lease %q", name), err)
}

// Release marks name released if holder holds it with token and it has not
// expired, and notifies waiters in the same statement. Otherwise it returns
// lease.ErrLost and changes nothing.
//
// Release is one round trip (releaseSQL, sent unprepared), and its commit
// does not wait for the WAL to reach the disk (synchronous_commit off for
// that transaction only): the release is visible, and waiters notified,
// as soon as it commits. A server crash before the WAL writer flushed it
// (a fraction of a second) can undo the release; the row is then as a
// release that failed leaves it, held until it expires. Grants still wait
// for their flush: an Acquire that sees the release commits synchronously,
// which flushes the release with it.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	q := s.releaseSQL()
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var got string
		return conn.QueryRow(ctx, q, s.once, name, holder, token, s.channel).Scan(&got)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.ErrLost
	}
	return s.wrap(fmt.Sprintf("release lease %q", name), err)
}

// releaseSQL is Release's statement: $1 name, $2 holder, $3 token, $4 the
// channel. It turns synchronous_commit off for its own transaction only
// (set_config's is_local), and only when it freed the row.
func (s *Store) releaseSQL() string {
	return fmt.Sprintf(`WITH freed AS (
	UPDATE %s SET released = true
	WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released AND expires_at > now()
	RETURNING name
)
SELECT freed.name FROM freed
	CROSS JOIN LATERAL pg_notify($4, freed.name) AS notified
	CROSS JOIN LATERAL set_config('synchronous_commit', 'off', true) AS no_flush_wait`, s.table)
}

// RequestStepDown sets the step-down flag and the reservation in one UPDATE
// guarded by "held, not by successor, and successor a live candidate or,
// for a partition, a live member of its group", and notifies waiters in
// the same statement. Only when it changes nothing
// does a read find out why, for the error.
func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	op := fmt.Sprintf("step down lease %q", name)
	if window <= 0 {
		return lease.Record{}, fmt.Errorf("%s: window must be positive", op)
	}
	q := fmt.Sprintf(`WITH asked AS (
	UPDATE %[1]s AS l SET
		step_down = true,
		successor = $2,
		excluded_holder = CASE WHEN $2 = '' THEN l.holder ELSE '' END,
		reserved_until = now() + $3::bigint * interval '1 microsecond'
	WHERE l.name = $1 AND NOT l.released AND l.expires_at > now() AND l.holder <> $2
		AND ($2 = ''
			OR EXISTS (SELECT 1 FROM %[3]s AS c
				WHERE c.name = $1 AND c.holder = $2 AND c.seen_until > now())
			OR ($5 <> '' AND EXISTS (SELECT 1 FROM %[4]s AS m
				WHERE m.grp = $5 AND m.member = $2 AND m.expires_at > now())))
	RETURNING l.*
)
SELECT %[2]s FROM asked CROSS JOIN LATERAL pg_notify($4, asked.name) AS notified`, s.table, recordColumns, s.candidates, s.members)
	// The name's group when it is a partition; empty, which no group's
	// name is, for any other name.
	group, _, _ := lease.SplitPartitionKey(name)
	var rec lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, q, name, successor, window.Microseconds(), s.channel, group))
		return err
	})
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return lease.Record{}, s.wrap(op, err)
	}
	cur, err := s.Get(ctx, name)
	if err != nil && !errors.Is(err, lease.ErrNotFound) {
		return lease.Record{}, s.wrap(op, err)
	}
	return lease.Record{}, fmt.Errorf("%s: %w", op, lease.StepDownRefusal(cur, err == nil, successor))
}

// Get returns name's record, or lease.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE name = $1`, recordColumns, s.table)
	var rec lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, q, name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.Record{}, lease.ErrNotFound
	}
	return rec, s.wrap(fmt.Sprintf("get lease %q", name), err)
}

// List returns every record, ordered by name bytewise.
func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	q := fmt.Sprintf(`SELECT %s FROM %s ORDER BY name COLLATE "C"`, recordColumns, s.table)
	var recs []lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return err
		}
		recs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Record, error) {
			return scanRecord(row)
		})
		return err
	})
	if err != nil {
		return nil, s.wrap("list leases", err)
	}
	return recs, nil
}
