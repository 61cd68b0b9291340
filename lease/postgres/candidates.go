package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// Campaign records holder as a candidate for name in one upsert by the
// database's clock: seen until now() + 2×ttl, ineligible until now() +
// c.Ineligible when that is positive, replacing what it said before
// (lease.Campaign).
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	op := fmt.Sprintf("campaign for lease %q", name)
	if ttl <= 0 {
		return fmt.Errorf("%s: %w", op, errTTL)
	}
	if len(c.Note) > lease.MaxNote {
		return fmt.Errorf("%s: note of %d bytes is longer than %d", op, len(c.Note), lease.MaxNote)
	}
	q := fmt.Sprintf(`INSERT INTO %s AS c (name, holder, seen_until, priority, preempt, ineligible_until, note)
VALUES ($1, $2, now() + 2 * $3::bigint * interval '1 microsecond', $4, $5,
	CASE WHEN $6::bigint > 0 THEN now() + $6::bigint * interval '1 microsecond' END, $7)
ON CONFLICT (name, holder) DO UPDATE SET
	seen_until = excluded.seen_until,
	priority = excluded.priority,
	preempt = excluded.preempt,
	ineligible_until = excluded.ineligible_until,
	note = excluded.note`, s.candidates)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, q, name, holder, ttl.Microseconds(), c.Priority, c.Preempt,
			ceilMicros(c.Ineligible), []byte(c.Note))
		return err
	})
	return s.wrap(op, err)
}

// ceilMicros is d in whole microseconds, rounded up: a positive
// ineligibility stays positive.
func ceilMicros(d time.Duration) int64 {
	us := d.Microseconds()
	if time.Duration(us)*time.Microsecond < d {
		us++
	}
	return us
}

// Candidates returns name's live candidates by the database's clock,
// ordered by holder bytewise.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	q := fmt.Sprintf(`SELECT holder,
	(extract(epoch FROM seen_until - now()) * 1000000)::bigint,
	priority, preempt,
	greatest(coalesce((extract(epoch FROM ineligible_until - now()) * 1000000)::bigint, 0), 0),
	note
FROM %s WHERE name = $1 AND seen_until > now()
ORDER BY holder COLLATE "C"`, s.candidates)
	var out []lease.Standing
	err := s.do(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, q, name)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Standing, error) {
			var st lease.Standing
			var seenUS, ineligibleUS int64
			var note []byte
			err := row.Scan(&st.Holder, &seenUS, &st.Priority, &st.Preempt, &ineligibleUS, &note)
			st.Seen = time.Duration(seenUS) * time.Microsecond
			st.Ineligible = time.Duration(ineligibleUS) * time.Microsecond
			st.Note = string(note)
			return st, err
		})
		return err
	})
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("read candidates for lease %q", name), err)
	}
	return out, nil
}

// Withdraw deletes holder's candidate record for name, if any.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	q := fmt.Sprintf(`DELETE FROM %s WHERE name = $1 AND holder = $2`, s.candidates)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, q, name, holder)
		return err
	})
	return s.wrap(fmt.Sprintf("withdraw from lease %q", name), err)
}

// forgetSQL is Forget's statement: $1 the name, $2 the channel. It locks
// name's row, deletes it and its candidates when it is neither held (by
// now()) nor its token ahead of the clock in milliseconds as the token
// rule reads it (clock_timestamp()), and notifies waiters then. It
// returns the row as it found it, with the two conditions; no row when
// there is none.
func (s *Store) forgetSQL() string {
	return fmt.Sprintf(`WITH cur AS (
	SELECT l.*,
		NOT l.released AND l.expires_at > now() AS held,
		l.token >= (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ahead
	FROM %[1]s AS l WHERE l.name = $1
	FOR UPDATE
), gone AS (
	DELETE FROM %[1]s AS l USING cur
	WHERE l.name = cur.name AND NOT cur.held AND NOT cur.ahead
	RETURNING l.name
), dropped AS (
	DELETE FROM %[2]s AS c USING gone WHERE c.name = gone.name
)
SELECT cur.held, cur.ahead, %[3]s
FROM cur LEFT JOIN LATERAL (SELECT pg_notify($2, gone.name) FROM gone) AS notified ON true`,
		s.table, s.candidates, recordColumnsOf("cur."))
}

// Forget deletes name's record and its candidates in one statement when
// name is not held by the database's clock and its token is behind the
// clock, and wakes the waiters (lease.Forgettable). Otherwise it changes
// nothing and returns a *lease.HeldError with the record, or
// lease.ErrTokenAhead; lease.ErrNotFound for a name with no record.
//
// It deletes a row of the leases table, which GrantSQL does not allow a
// replica's role: an operator forgets a name as a role that may.
func (s *Store) Forget(ctx context.Context, name string) error {
	op := fmt.Sprintf("forget lease %q", name)
	q := s.forgetSQL()
	var held, ahead bool
	var rec lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var err error
		rec, _, err = scanNullableRecord(conn.QueryRow(ctx, q, name, s.channel), &held, &ahead)
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, lease.ErrNotFound)
	case err != nil:
		return s.wrap(op, err)
	case held:
		return fmt.Errorf("%s: %w", op, &lease.HeldError{Record: rec})
	case ahead:
		return fmt.Errorf("%s: %w", op, lease.ErrTokenAhead)
	}
	return nil
}
