package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// A group's partition leases are rows of the lease table named by
// lease.PartitionKey; the groups table holds its number of partitions and
// a version, and the members table its members. Join, RenewMember and
// Leave are one transaction each; every one that changes the live members
// raises the group's version in the same transaction, and so does every
// change of a partition's tenure (see changeHeld and grant). GetGroup is
// one statement.

// groupRead reads a group in one statement: a 'g' row (partitions and
// version), an 'm' row per live member, and a 'p' row per lease whose name
// starts with the group's partition prefix (the caller keeps the group's
// own partitions).
var groupRead = "SELECT 'g', partitions, version, NULL, NULL, " + nullColumns + " FROM `" + groupsTable + "` WHERE name = ?\n" +
	"UNION ALL SELECT 'm', 0, 0, member, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), " + nullColumns +
	" FROM `" + membersTable + "` WHERE grp = ? AND expires_at > UTC_TIMESTAMP(6)\n" +
	"UNION ALL SELECT 'p', 0, 0, NULL, NULL, " + recordColumns + " FROM `" + leasesTable + "` WHERE name LIKE ? ESCAPE '!'"

// nullColumns stands for recordColumns in rows of kinds 'g' and 'm'.
const nullColumns = "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"

// partitionPattern is the LIKE pattern of group's partition leases.
func partitionPattern(group string) string {
	escaped := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(group)
	return escaped + " #%"
}

// readGroup reads group and its version through r; lease.ErrNotFound for
// a group never joined.
func readGroup(ctx context.Context, r runner, group string) (lease.Group, int64, error) {
	rows, err := r.query(ctx, groupRead, group, group, partitionPattern(group))
	if err != nil {
		return lease.Group{}, 0, err
	}
	defer rows.Close()
	g := lease.Group{Name: group}
	var (
		found   bool
		version int64
		recs    = map[int]lease.Record{}
	)
	for rows.Next() {
		var (
			kind   string
			n, v   int64
			member sql.NullString
			us     sql.NullInt64
			l      nullRecord
		)
		if err := rows.Scan(append([]any{&kind, &n, &v, &member, &us}, l.dest()...)...); err != nil {
			return lease.Group{}, 0, err
		}
		switch kind {
		case "g":
			found, g.Partitions, version = true, int(n), v
		case "m":
			g.Members = append(g.Members, lease.Member{Identity: member.String, Remaining: time.Duration(us.Int64) * time.Microsecond})
		case "p":
			rec := l.record()
			if owner, p, ok := lease.SplitPartitionKey(rec.Name); ok && owner == group {
				recs[p] = rec
			}
		}
	}
	if err := rows.Err(); err != nil {
		return lease.Group{}, 0, err
	}
	if !found {
		return lease.Group{}, 0, lease.ErrNotFound
	}
	g.Leases = make([]lease.Record, g.Partitions)
	for p := range g.Leases {
		if rec, ok := recs[p]; ok {
			g.Leases[p] = rec
		} else {
			g.Leases[p].Name = lease.PartitionKey(group, p)
		}
	}
	slices.SortFunc(g.Members, func(a, b lease.Member) int { return strings.Compare(a.Identity, b.Identity) })
	return g, version, nil
}

// nullRecord holds recordColumns of a row that may not be a lease.
type nullRecord struct {
	name, holder, successor, excluded, where sql.NullString
	token, remainingUS, reservedUS, version  sql.NullInt64
	acquired, renewed, expires               sql.NullTime
	released, stepDown                       sql.NullBool
}

func (l *nullRecord) dest() []any {
	return []any{&l.name, &l.holder, &l.token, &l.acquired, &l.renewed, &l.expires, &l.released,
		&l.remainingUS, &l.stepDown, &l.successor, &l.excluded, &l.reservedUS, &l.where, &l.version}
}

func (l *nullRecord) record() lease.Record {
	return lease.Record{Name: l.name.String, Holder: l.holder.String, Token: l.token.Int64,
		Acquired: l.acquired.Time, Renewed: l.renewed.Time, Expires: l.expires.Time, Released: l.released.Bool,
		Remaining: time.Duration(l.remainingUS.Int64) * time.Microsecond, StepDown: l.stepDown.Bool,
		Successor: l.successor.String, Excluded: l.excluded.String,
		Reserved: time.Duration(l.reservedUS.Int64) * time.Microsecond, Where: l.where.String}
}

// keepMember extends member's record in group to ttl. When it was not live
// (absent, expired, or left), it inserts it again, provided the group
// exists, and raises the group's version: a member joined.
func keepMember(ctx context.Context, r runner, group, member string, ttl time.Duration) error {
	n, err := affected(r.exec(ctx, "UPDATE `"+membersTable+"` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "+
		"WHERE grp = ? AND member = ? AND expires_at > UTC_TIMESTAMP(6)", micros(ttl), group, member))
	if err != nil || n > 0 {
		return err
	}
	n, err = affected(r.exec(ctx, "INSERT INTO `"+membersTable+"` (grp, member, expires_at) "+
		"SELECT name, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND FROM `"+groupsTable+"` WHERE name = ? "+
		"ON DUPLICATE KEY UPDATE expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND",
		member, micros(ttl), group, micros(ttl)))
	if err != nil || n == 0 {
		return err
	}
	_, err = r.exec(ctx, raiseGroup, group)
	return err
}

// Join implements lease.Store in one transaction: it creates the group
// with its number of partitions unless it exists, refuses another number,
// keeps member's record (see keepMember), deletes member records that
// expired more than a ttl ago, and reads the group.
func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("join group %q", group)
	if err := validMember(group, member, ttl); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := checkLen("group name", lease.PartitionKey(group, partitions-1), maxNameLen); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	var g lease.Group
	err := s.inTx(ctx, func(r runner) error {
		// LAST_INSERT_ID returns the partitions the group has: the new
		// row's, or the existing one's.
		res, err := r.exec(ctx, "INSERT INTO `"+groupsTable+"` (name, partitions, version) VALUES (?, LAST_INSERT_ID(?), 1) "+
			"ON DUPLICATE KEY UPDATE partitions = LAST_INSERT_ID(partitions)", group, partitions)
		if err != nil {
			return err
		}
		have, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if int(have) != partitions {
			return &lease.PartitionsError{Group: group, Have: int(have), Want: partitions}
		}
		if err := keepMember(ctx, r, group, member, ttl); err != nil {
			return err
		}
		if _, err := r.exec(ctx, "DELETE FROM `"+membersTable+"` WHERE grp = ? AND member <> ? "+
			"AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND", group, member, micros(ttl)); err != nil {
			return err
		}
		g, _, err = readGroup(ctx, r, group)
		return err
	})
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	return g, nil
}

// RenewMember implements lease.Store in one transaction, whatever the
// number of claims: START TRANSACTION, an UPDATE of member's record, one
// UPDATE of every claimed partition lease still held with its token, the
// group's read, COMMIT (and, when the member's record had expired, its
// insert and the version's raise).
func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("renew member %q of group %q", member, group)
	if err := validMember(group, member, ttl); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	var g lease.Group
	err := s.inTx(ctx, func(r runner) error {
		if err := keepMember(ctx, r, group, member, ttl); err != nil {
			return err
		}
		if len(claims) > 0 {
			names := make([]any, 0, len(claims))
			pairs := make([]any, 0, 2*len(claims))
			for _, c := range claims {
				key := lease.PartitionKey(group, c.Partition)
				names = append(names, key)
				pairs = append(pairs, key, c.Token)
			}
			args := append([]any{micros(ttl)}, names...)
			args = append(append(args, member), pairs...)
			if _, err := r.exec(ctx, "UPDATE `"+leasesTable+"` SET renewed_at = UTC_TIMESTAMP(6), "+
				"expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND "+
				"WHERE name IN ("+placeholders(len(names))+") AND holder = ? AND NOT released AND expires_at > UTC_TIMESTAMP(6) "+
				"AND (name, token) IN ("+strings.TrimSuffix(strings.Repeat("(?, ?),", len(claims)), ",")+")", args...); err != nil {
				return err
			}
		}
		var err error
		g, _, err = readGroup(ctx, r, group)
		return err // lease.ErrNotFound rolls back whatever was renewed
	})
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	return g, nil
}

// Leave implements lease.Store in one transaction: it deletes member's
// record and, if there was one, raises the group's version.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	err := s.inTx(ctx, func(r runner) error {
		n, err := affected(r.exec(ctx, "DELETE FROM `"+membersTable+"` WHERE grp = ? AND member = ?", group, member))
		if err != nil || n == 0 {
			return err
		}
		_, err = r.exec(ctx, raiseGroup, group)
		return err
	})
	return s.wrap(fmt.Sprintf("leave group %q", group), err)
}

// GetGroup implements lease.Store in one statement.
func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	g, _, err := readGroup(ctx, s.auto(), group)
	if err != nil {
		return lease.Group{}, s.wrap(fmt.Sprintf("get group %q", group), err)
	}
	return g, nil
}

// validMember checks what a member's record writes.
func validMember(group, member string, ttl time.Duration) error {
	if ttl <= 0 {
		return errTTL
	}
	if err := checkLen("group name", group, maxNameLen); err != nil {
		return err
	}
	return checkLen("member", member, maxNameLen)
}
