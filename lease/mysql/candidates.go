package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// campaignSQL records a candidate with what it says of itself, replacing
// what it said before (lease.Campaign): name, holder, seen for µs,
// priority, preempt, ineligible for µs (0: eligible, twice), note, then
// the same values again for the update. UTC_TIMESTAMP(6) is one reading
// for the whole statement.
var campaignSQL = "INSERT INTO `" + candidatesTable + "` (name, holder, seen_until, priority, preempt, ineligible_until, note) " +
	"VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, ?, " +
	"IF(? > 0, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, NULL), ?) " +
	"ON DUPLICATE KEY UPDATE seen_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, priority = ?, preempt = ?, " +
	"ineligible_until = IF(? > 0, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, NULL), note = ?"

// Campaign records holder as a candidate for name in one statement by the
// server's clock: seen until now + 2×ttl, ineligible until now +
// c.Ineligible when that is positive.
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	op := fmt.Sprintf("campaign for lease %q", name)
	if err := validLease(name, holder, ttl); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := checkLen("note", c.Note, lease.MaxNote); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return s.wrap(op, err)
	}
	seen, ineligible := micros(2*ttl), ceilMicros(c.Ineligible)
	note := []byte(c.Note)
	_, err := s.auto().exec(ctx, campaignSQL, name, holder, seen, c.Priority, c.Preempt, ineligible, ineligible, note,
		seen, c.Priority, c.Preempt, ineligible, ineligible, note)
	return s.wrap(op, err)
}

// ceilMicros is d in whole microseconds, rounded up, and 0 when d is not
// positive: a positive ineligibility stays positive.
func ceilMicros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	us := d.Microseconds()
	if time.Duration(us)*time.Microsecond < d {
		us++
	}
	return us
}

// candidatesSQL reads the live candidates of a name, ordered by holder
// bytewise (a binary string), measured by the server's clock.
var candidatesSQL = "SELECT holder, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), seen_until), priority, preempt, " +
	"GREATEST(IFNULL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), ineligible_until), 0), 0), note " +
	"FROM `" + candidatesTable + "` WHERE name = ? AND seen_until > UTC_TIMESTAMP(6) ORDER BY holder"

// Candidates returns name's live candidates by the server's clock.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	op := fmt.Sprintf("read candidates for lease %q", name)
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, s.wrap(op, err)
	}
	out, err := s.candidates(ctx, name)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

func (s *Store) candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	rows, err := s.auto().query(ctx, candidatesSQL, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lease.Standing
	for rows.Next() {
		var st lease.Standing
		var seenUS, ineligibleUS int64
		var note []byte
		if err := rows.Scan(&st.Holder, &seenUS, &st.Priority, &st.Preempt, &ineligibleUS, &note); err != nil {
			return nil, err
		}
		st.Seen = time.Duration(seenUS) * time.Microsecond
		st.Ineligible = time.Duration(ineligibleUS) * time.Microsecond
		st.Note = string(note)
		out = append(out, st)
	}
	return out, rows.Err()
}

// Withdraw ends holder's candidacy for name. It updates rather than
// deletes, as the documented privileges give a replica no DELETE on the
// candidates table: the row is no longer seen and says nothing, which is
// what a candidate never seen reads as.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	op := fmt.Sprintf("withdraw from lease %q", name)
	if err := lease.IfClosed(s.closed); err != nil {
		return s.wrap(op, err)
	}
	_, err := s.auto().exec(ctx, "UPDATE `"+candidatesTable+"` SET seen_until = '1970-01-01 00:00:01', "+
		"priority = 0, preempt = FALSE, ineligible_until = NULL, note = '' WHERE name = ? AND holder = ?", name, holder)
	return s.wrap(op, err)
}

// Forget deletes name's record (its lease and tokens rows) and its
// candidates in one transaction, when lease.Forgettable allows at the
// server's clock: it locks the lease row, decides, deletes, and raises the
// version of the name's group for a partition. Waiters of a name that is
// not held poll it, and see it gone. Otherwise it changes nothing and
// returns a *lease.HeldError with the record, or lease.ErrTokenAhead;
// lease.ErrNotFound for a name with no record.
//
// It deletes rows, which the documented privileges do not give a replica's
// user: an operator forgets a name as a user that may.
func (s *Store) Forget(ctx context.Context, name string) error {
	op := fmt.Sprintf("forget lease %q", name)
	var refusal error
	err := s.inTx(ctx, func(r runner) error {
		refusal = nil
		var now time.Time
		cur, _, err := scanRecord(r.queryRow(ctx, lockLease, name), &now)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			refusal = lease.ErrNotFound
			return nil
		case err != nil:
			return err
		}
		if refusal = lease.Forgettable(cur, now); refusal != nil {
			return nil
		}
		for _, table := range []string{leasesTable, tokensTable, candidatesTable} {
			if _, err := r.exec(ctx, "DELETE FROM `"+table+"` WHERE name = ?", name); err != nil {
				return err
			}
		}
		if group := groupOf(name); group != nil {
			if _, err := r.exec(ctx, raiseGroup, group); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return s.wrap(op, err)
	case refusal != nil:
		return fmt.Errorf("%s: %w", op, refusal)
	}
	return nil
}
