package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// A group's partition leases are rows of leases named by
// lease.PartitionKey; groups holds its number of partitions and members its
// members. Every group operation is one BEGIN IMMEDIATE transaction.

// keepMemberSQL makes member ?2 of group ?1 live until ?4 under boot id ?3.
const keepMemberSQL = `INSERT INTO members (grp, member, boot_id, expires_ms) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (grp, member) DO UPDATE SET boot_id = excluded.boot_id, expires_ms = excluded.expires_ms`

// renewClaimsSQL extends, to ?3, the partition leases listed in the JSON
// array ?5 of [name, token] pairs that holder ?1 holds at store time ?4
// under boot id ?2.
const renewClaimsSQL = `UPDATE leases SET renewed_ms = ?4, expires_ms = ?3
WHERE holder = ?1 AND boot_id = ?2 AND NOT released AND expires_ms > ?4
	AND (name, token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?5))`

// groupLeasesSQL reads the partition leases of group ?1: every name that
// starts with "?1 #" and a digit ('0' … '9' sort before ':').
const groupLeasesSQL = `SELECT ` + columns + ` FROM leases WHERE name >= ?1 || ' #0' AND name < ?1 || ' #:'`

// Join implements lease.Store.
func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("join group %q", group)
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.fresh(ctx); err != nil {
		return lease.Group{}, s.fail(op, err)
	}
	return s.groupTx(ctx, op, group, member, ttl, func(conn *sql.Conn, have int, found bool) error {
		switch {
		case !found:
			_, err := conn.ExecContext(ctx, `INSERT INTO groups (name, partitions) VALUES (?1, ?2)`, group, partitions)
			return err
		case have != partitions:
			return &lease.PartitionsError{Group: group, Have: have, Want: partitions}
		}
		return nil
	}, nil)
}

// RenewMember implements lease.Store in one transaction.
func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("renew member %q of group %q", member, group)
	if err := s.lostIfReplaced(); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	return s.groupTx(ctx, op, group, member, ttl, func(conn *sql.Conn, _ int, found bool) error {
		if !found {
			return lease.ErrNotFound
		}
		return nil
	}, claims)
}

// groupTx runs a Join or a RenewMember in one transaction: it reads the
// group's partition count, lets check decide on it, keeps member alive
// until now + ttl, renews claims, and returns the group as it is then.
func (s *Store) groupTx(ctx context.Context, op, group, member string, ttl time.Duration,
	check func(conn *sql.Conn, partitions int, found bool) error, claims []lease.Claim) (lease.Group, error) {
	ttlMs, err := millis(ttl)
	if err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		g     lease.Group
		added bool
	)
	err = s.inTx(ctx, func(conn *sql.Conn) error {
		n, found, err := groupSize(ctx, conn, group)
		if err != nil {
			return err
		}
		if err := check(conn, n, found); err != nil {
			return err
		}
		if added, err = s.keepMember(ctx, conn, group, member, now, ttlMs); err != nil {
			return err
		}
		if len(claims) > 0 {
			pairs := make([][2]any, len(claims))
			for i, c := range claims {
				pairs[i] = [2]any{lease.PartitionKey(group, c.Partition), c.Token}
			}
			js, err := json.Marshal(pairs)
			if err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, renewClaimsSQL, member, s.clock.bootID,
				now.millis()+ttlMs, now.millis(), string(js)); err != nil {
				return err
			}
		}
		g, err = s.readGroup(ctx, conn, group, now)
		return err
	})
	var pe *lease.PartitionsError
	switch {
	case errors.As(err, &pe), errors.Is(err, lease.ErrNotFound):
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	case err != nil:
		return lease.Group{}, s.fail(op, err)
	}
	if added {
		s.wake()
	}
	return g, nil
}

// keepMember makes member live until now + ttlMs, and reports whether it
// was not live before.
func (s *Store) keepMember(ctx context.Context, conn *sql.Conn, group, member string, now reading, ttlMs int64) (bool, error) {
	var (
		bootID  string
		expires int64
	)
	err := conn.QueryRowContext(ctx, `SELECT boot_id, expires_ms FROM members WHERE grp = ?1 AND member = ?2`,
		group, member).Scan(&bootID, &expires)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	added := err != nil || bootID != s.clock.bootID || expires <= now.millis()
	if added {
		// Prune members long gone, while the write lock is held anyway.
		if _, err := conn.ExecContext(ctx, `DELETE FROM members WHERE grp = ?1 AND (boot_id <> ?2 OR expires_ms < ?3)`,
			group, s.clock.bootID, now.millis()-ttlMs); err != nil {
			return false, err
		}
	}
	_, err = conn.ExecContext(ctx, keepMemberSQL, group, member, s.clock.bootID, now.millis()+ttlMs)
	return added, err
}

// Leave implements lease.Store.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	var n int64
	err := retryBusy(ctx, busyTimeout, func() error {
		res, err := s.db().ExecContext(ctx, `DELETE FROM members WHERE grp = ?1 AND member = ?2`, group, member)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("leave group %q", group), err)
	}
	if n > 0 {
		s.wake()
	}
	return nil
}

// GetGroup implements lease.Store; it reads in one transaction.
func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	op := fmt.Sprintf("get group %q", group)
	if err := s.fresh(ctx); err != nil {
		return lease.Group{}, s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	g, err := s.readGroupTx(ctx, group, now)
	if errors.Is(err, lease.ErrNotFound) {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if err != nil {
		return lease.Group{}, s.fail(op, err)
	}
	return g, nil
}

// readGroupTx reads group in a read transaction, so that its members and
// leases are one snapshot.
func (s *Store) readGroupTx(ctx context.Context, group string, now reading) (lease.Group, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	var g lease.Group
	err := retryBusy(ctx, busyTimeout, func() error {
		conn, err := s.db().Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
			return err
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		g, err = s.readGroup(ctx, conn, group, now)
		return err
	})
	return g, err
}

func groupSize(ctx context.Context, q *sql.Conn, group string) (n int, found bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT partitions FROM groups WHERE name = ?1`, group).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return n, err == nil, err
}

// readGroup reads an existing group as of now, or returns
// lease.ErrNotFound.
func (s *Store) readGroup(ctx context.Context, conn *sql.Conn, group string, now reading) (lease.Group, error) {
	n, found, err := groupSize(ctx, conn, group)
	if err != nil {
		return lease.Group{}, err
	}
	if !found {
		return lease.Group{}, lease.ErrNotFound
	}
	g := lease.Group{Name: group, Partitions: n, Leases: make([]lease.Record, n)}
	for p := range g.Leases {
		g.Leases[p].Name = lease.PartitionKey(group, p)
	}
	rows, err := scanRows(ctx, conn, groupLeasesSQL, group)
	if err != nil {
		return lease.Group{}, err
	}
	for _, r := range rows {
		if grp, p, ok := lease.SplitPartitionKey(r.name); ok && grp == group && p < n {
			g.Leases[p] = s.recordAt(r, now)
		}
	}
	mrows, err := conn.QueryContext(ctx, `SELECT member, expires_ms FROM members
		WHERE grp = ?1 AND boot_id = ?2 AND expires_ms > ?3 ORDER BY member`, group, s.clock.bootID, now.millis())
	if err != nil {
		return lease.Group{}, err
	}
	defer mrows.Close()
	for mrows.Next() {
		var (
			m       lease.Member
			expires int64
		)
		if err := mrows.Scan(&m.Identity, &expires); err != nil {
			return lease.Group{}, err
		}
		m.Remaining = now.until(expires)
		g.Members = append(g.Members, m)
	}
	return g, mrows.Err()
}
