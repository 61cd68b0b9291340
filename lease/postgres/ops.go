package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaderrun/leaderrun/lease"
)

// recordColumns are the columns every statement returns, in scanRecord's
// order; remaining is computed by the database from its own clock.
const recordColumns = `name, holder, token, acquired_at, renewed_at, expires_at, released,
	(extract(epoch FROM expires_at - now()) * 1000000)::bigint AS remaining_us`

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
	var remainingUS int64
	err := row.Scan(&rec.Name, &rec.Holder, &rec.Token, &rec.Acquired, &rec.Renewed,
		&rec.Expires, &rec.Released, &remainingUS)
	rec.Remaining = time.Duration(remainingUS) * time.Microsecond
	return rec, err
}

// Acquire grants name to holder for ttl when the row is absent, released or
// expired by the database's clock, in one INSERT … ON CONFLICT DO UPDATE,
// and notifies waiters. The new token is max(previous token + 1, database
// clock in milliseconds). If another holder, or holder itself, has the name,
// Acquire returns a *lease.HeldError with the row as the database reports
// it. A statement whose outcome is unknown returns an error.
//
// While a child's transaction holds fence on the name, Acquire waits for
// that transaction to end (up to ctx's deadline).
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if ttl <= 0 {
		return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, errTTL)
	}
	q := fmt.Sprintf(`WITH granted AS (
	INSERT INTO %[1]s AS l (name, holder, token, acquired_at, renewed_at, expires_at, released)
	VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1000)::bigint,
		now(), now(), now() + $3::bigint * interval '1 microsecond', false)
	ON CONFLICT (name) DO UPDATE SET
		holder = excluded.holder,
		token = greatest(l.token + 1, excluded.token),
		acquired_at = excluded.acquired_at,
		renewed_at = excluded.renewed_at,
		expires_at = excluded.expires_at,
		released = false
	WHERE l.released OR l.expires_at <= now()
	RETURNING l.*
)
SELECT %[2]s FROM granted CROSS JOIN LATERAL pg_notify($4, granted.name) AS notified`, s.table, recordColumns)
	for range acquireAttempts {
		mark := s.mark(name)
		var rec lease.Record
		err := s.do(ctx, func(conn *pgx.Conn) error {
			var err error
			rec, err = scanRecord(conn.QueryRow(ctx, q, name, holder, ttl.Microseconds(), s.channel))
			return err
		})
		if err == nil {
			s.observe(name, mark, stateOf(rec))
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
			return lease.Record{}, s.wrap(fmt.Sprintf("acquire lease %q", name), err)
		}
		cur, err := s.get(ctx, name, mark)
		switch {
		case err == nil && cur.Held():
			return lease.Record{}, &lease.HeldError{Record: cur}
		case err == nil, errors.Is(err, lease.ErrNotFound):
			continue // freed or deleted since the grant was refused: try again
		default:
			return lease.Record{}, s.wrap(fmt.Sprintf("acquire lease %q", name), err)
		}
	}
	return lease.Record{}, fmt.Errorf("acquire lease %q: the name changed hands %d times during the attempt", name, acquireAttempts)
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

// Release marks name released if holder holds it with token and it has not
// expired, and notifies waiters in the same statement. Otherwise it returns
// lease.ErrLost and changes nothing.
func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	q := fmt.Sprintf(`WITH freed AS (
	UPDATE %s SET released = true
	WHERE name = $1 AND holder = $2 AND token = $3 AND NOT released AND expires_at > now()
	RETURNING name
)
SELECT freed.name FROM freed CROSS JOIN LATERAL pg_notify($4, freed.name) AS notified`, s.table)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var got string
		return conn.QueryRow(ctx, q, name, holder, token, s.channel).Scan(&got)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.ErrLost
	}
	return s.wrap(fmt.Sprintf("release lease %q", name), err)
}

// Get returns name's record, or lease.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	rec, err := s.get(ctx, name, s.mark(name))
	return rec, s.wrap(fmt.Sprintf("get lease %q", name), err)
}

// get reads name's row and remembers what it saw for Wait; mark is the
// listener's state from before the read was sent.
func (s *Store) get(ctx context.Context, name string, mark listenState) (lease.Record, error) {
	q := fmt.Sprintf(`SELECT %s FROM %s WHERE name = $1`, recordColumns, s.table)
	var rec lease.Record
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var err error
		rec, err = scanRecord(conn.QueryRow(ctx, q, name))
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		s.observe(name, mark, rowState{})
		return lease.Record{}, lease.ErrNotFound
	case err != nil:
		return lease.Record{}, err
	}
	s.observe(name, mark, stateOf(rec))
	return rec, nil
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
