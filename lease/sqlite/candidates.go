package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// campaignSQL records holder ?2 as a candidate for name ?1 under boot id
// ?3, seen until ?4, with priority ?5, preempt ?6, ineligible until ?7 (0:
// eligible) and note ?8, replacing whatever it said before
// (lease.Campaign).
const campaignSQL = `INSERT INTO candidates (name, holder, boot_id, seen_ms, priority, preempt, ineligible_ms, note)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (name, holder) DO UPDATE SET
	boot_id = excluded.boot_id,
	seen_ms = excluded.seen_ms,
	priority = excluded.priority,
	preempt = excluded.preempt,
	ineligible_ms = excluded.ineligible_ms,
	note = excluded.note`

// candidatesSQL reads the live candidates for name ?1 at store time ?3
// under boot id ?2, ordered by holder (BINARY collation: bytewise).
const candidatesSQL = `SELECT holder, seen_ms, priority, preempt, ineligible_ms, note FROM candidates
WHERE name = ?1 AND boot_id = ?2 AND seen_ms > ?3
ORDER BY holder`

// Campaign implements lease.Campaigner: one upsert, by the store's clock.
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	op := fmt.Sprintf("campaign for lease %q", name)
	ttlMs, err := millis(ttl)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(c.Note) > lease.MaxNote {
		return fmt.Errorf("%s: note of %d bytes is longer than %d", op, len(c.Note), lease.MaxNote)
	}
	if err := s.fresh(ctx); err != nil {
		return s.fail(op, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var ineligible int64
	if c.Ineligible > 0 {
		ineligible = now.millis() + ceilMillis(c.Ineligible)
	}
	err = s.recreating(ctx, func() error {
		return retryBusy(ctx, busyTimeout, func() error {
			_, err := s.db().ExecContext(ctx, campaignSQL, name, holder, s.clock.bootID, now.millis()+2*ttlMs,
				c.Priority, c.Preempt, ineligible, c.Note)
			return err
		})
	})
	if err != nil {
		return s.fail(op, err)
	}
	s.noteCandidate(name, holder, now.millis(), ttlMs)
	return nil
}

// ceilMillis is d in whole milliseconds, rounded up: a positive
// ineligibility stays positive.
func ceilMillis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return ms
}

// Candidates implements lease.Campaigner.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	op := fmt.Sprintf("read candidates for lease %q", name)
	if err := s.fresh(ctx); err != nil {
		return nil, s.fail(op, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var out []lease.Standing
	err = s.recreating(ctx, func() error {
		return retryBusy(ctx, busyTimeout, func() (err error) {
			out, err = s.readCandidates(ctx, name, now)
			return err
		})
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// readCandidates reads name's live candidates measured at now.
func (s *Store) readCandidates(ctx context.Context, name string, now reading) ([]lease.Standing, error) {
	rows, err := s.db().QueryContext(ctx, candidatesSQL, name, s.clock.bootID, now.millis())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lease.Standing
	for rows.Next() {
		var st lease.Standing
		var seen, ineligible int64
		if err := rows.Scan(&st.Holder, &seen, &st.Priority, &st.Preempt, &ineligible, &st.Note); err != nil {
			return nil, err
		}
		st.Seen = now.until(seen)
		if left := now.until(ineligible); ineligible > 0 && left > 0 {
			st.Ineligible = left
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// Withdraw implements lease.Campaigner.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	op := fmt.Sprintf("withdraw from lease %q", name)
	if err := s.fresh(ctx); err != nil {
		return s.fail(op, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return s.fail(op, err)
	}
	err := s.recreating(ctx, func() error {
		return retryBusy(ctx, busyTimeout, func() error {
			_, err := s.db().ExecContext(ctx, `DELETE FROM candidates WHERE name = ?1 AND holder = ?2`, name, holder)
			return err
		})
	})
	if err != nil {
		return s.fail(op, err)
	}
	s.forgetMarks(name, holder)
	return nil
}

// Forget implements lease.Campaigner in one BEGIN IMMEDIATE transaction:
// it reads name's record and deletes it and its candidates only when
// lease.Forgettable allows, by the store's clock (tokens come from the
// wall clock, so the token rule compares with that). It wakes the waiters.
func (s *Store) Forget(ctx context.Context, name string) error {
	op := fmt.Sprintf("forget lease %q", name)
	if err := s.fresh(ctx); err != nil {
		return s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var refusal error
	err = s.inTx(ctx, func(conn *sql.Conn) error {
		refusal = nil
		rows, err := scanRows(ctx, conn, getSQL, name)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			refusal = lease.ErrNotFound
			return nil
		}
		if refusal = lease.Forgettable(s.recordAt(rows[0], now), now.wall); refusal != nil {
			return nil
		}
		for _, q := range []string{`DELETE FROM leases WHERE name = ?1`, `DELETE FROM candidates WHERE name = ?1`} {
			if _, err := conn.ExecContext(ctx, q, name); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return s.fail(op, err)
	case refusal != nil:
		return fmt.Errorf("%s: %w", op, refusal)
	}
	s.forgetMarks(name, "")
	s.wake()
	return nil
}

// forgetMarks drops the candidate marks this Store remembers writing
// (markCandidate) for holder of name, or for every holder of name when
// holder is empty, so that the next refused grant writes its mark again.
func (s *Store) forgetMarks(name, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if holder != "" {
		delete(s.candidate, name+"\x00"+holder)
		return
	}
	for k := range s.candidate {
		if strings.HasPrefix(k, name+"\x00") {
			delete(s.candidate, k)
		}
	}
}
