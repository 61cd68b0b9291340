package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// A group's partition leases are rows of the lease table named by
// lease.PartitionKey; the groups table holds its number of partitions and
// the members table its members. Join, RenewMember and GetGroup are one
// statement each: data-modifying CTEs, then one SELECT that returns the
// group as rows of three kinds — 'g' (the partition count), 'm' (a live
// member) and 'p' (a partition, with its lease's columns or NULLs).
//
// The statements' CTEs see the tables as they were when the statement
// began, so the final SELECT takes the caller's own member record from the
// "kept" CTE and the leases it renewed from "renewed", and everything else
// from the tables.

// nullRecord stands for the lease columns in rows of kinds 'g' and 'm'.
const nullRecord = `NULL::text, NULL::text, NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
	NULL::boolean, NULL::bigint, NULL::boolean, NULL::text, NULL::text, NULL::bigint, NULL::text`

// groupTail is the end of every group statement: $1 is the group, $2 the
// calling member (” for none); the statement defines the CTEs g
// (partitions), kept (member, expires_at), renewed (lease rows) and
// notified (one row per notification sent).
func (s *Store) groupTail() string {
	return fmt.Sprintf(`, keys AS (
	SELECT i AS p, $1 || ' #' || i AS name FROM g, generate_series(0, g.partitions - 1) AS i
), cur AS (
	SELECT l.* FROM keys k JOIN %[1]s AS l ON l.name = k.name WHERE l.name NOT IN (SELECT name FROM renewed)
	UNION ALL
	SELECT * FROM renewed
), live AS (
	SELECT member, expires_at FROM %[2]s WHERE grp = $1 AND member <> $2 AND expires_at > now()
	UNION ALL
	SELECT member, expires_at FROM kept
)
SELECT 'g', g.partitions, NULL::text, (SELECT count(*) FROM notified)::bigint, %[3]s FROM g
UNION ALL
SELECT 'm', 0, member, (extract(epoch FROM expires_at - now()) * 1000000)::bigint, %[3]s FROM live
UNION ALL
SELECT 'p', k.p, NULL::text, NULL::bigint, %[4]s FROM keys k LEFT JOIN cur c ON c.name = k.name`,
		s.table, s.members, nullRecord, recordColumnsOf("c."))
}

// Join implements lease.Store in one statement.
func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("join group %q", group)
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if ttl <= 0 {
		return lease.Group{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	q := fmt.Sprintf(`WITH g AS (
	INSERT INTO %[1]s AS g (name, partitions) VALUES ($1, $4)
	ON CONFLICT (name) DO UPDATE SET partitions = g.partitions
	RETURNING g.partitions
), old AS (
	SELECT expires_at FROM %[2]s WHERE grp = $1 AND member = $2 AND expires_at > now()
), kept AS (
	INSERT INTO %[2]s AS m (grp, member, expires_at)
	SELECT $1, $2, now() + $3::bigint * interval '1 microsecond' FROM g WHERE g.partitions = $4
	ON CONFLICT (grp, member) DO UPDATE SET expires_at = excluded.expires_at
	RETURNING m.member, m.expires_at
), renewed AS (
	SELECT * FROM %[3]s WHERE false
), notified AS (
	SELECT pg_notify($5, $1) FROM kept WHERE NOT EXISTS (SELECT 1 FROM old)
)`+s.groupTail(), s.groups, s.members, s.table)
	g, err := s.queryGroup(ctx, q, group, member, ttl.Microseconds(), partitions, s.channel)
	switch {
	case err != nil:
		return lease.Group{}, s.wrap(op, err)
	case g.Partitions != partitions:
		return lease.Group{}, fmt.Errorf("%s: %w", op, &lease.PartitionsError{Group: group, Have: g.Partitions, Want: partitions})
	}
	return g, nil
}

// RenewMember implements lease.Store in one statement, whatever the number
// of claims. It also deletes member records that expired more than a ttl
// ago.
func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("renew member %q of group %q", member, group)
	if ttl <= 0 {
		return lease.Group{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	names := make([]string, len(claims))
	tokens := make([]int64, len(claims))
	for i, c := range claims {
		names[i], tokens[i] = lease.PartitionKey(group, c.Partition), c.Token
	}
	q := fmt.Sprintf(`WITH g AS (
	SELECT partitions FROM %[1]s WHERE name = $1
), old AS (
	SELECT expires_at FROM %[2]s WHERE grp = $1 AND member = $2 AND expires_at > now()
), kept AS (
	INSERT INTO %[2]s AS m (grp, member, expires_at)
	SELECT $1, $2, now() + $3::bigint * interval '1 microsecond' FROM g
	ON CONFLICT (grp, member) DO UPDATE SET expires_at = excluded.expires_at
	RETURNING m.member, m.expires_at
), pruned AS (
	DELETE FROM %[2]s WHERE grp = $1 AND member <> $2 AND expires_at < now() - $3::bigint * interval '1 microsecond'
), renewed AS (
	UPDATE %[3]s AS l SET renewed_at = now(), expires_at = now() + $3::bigint * interval '1 microsecond'
	FROM unnest($4::text[], $5::bigint[]) AS c(name, token)
	WHERE l.name = c.name AND l.token = c.token AND l.holder = $2 AND NOT l.released AND l.expires_at > now()
		AND EXISTS (SELECT 1 FROM g)
	RETURNING l.*
), notified AS (
	SELECT pg_notify($6, $1) FROM kept WHERE NOT EXISTS (SELECT 1 FROM old)
)`+s.groupTail(), s.groups, s.members, s.table)
	g, err := s.queryGroup(ctx, q, group, member, ttl.Microseconds(), names, tokens, s.channel)
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	return g, nil
}

// GetGroup implements lease.Store in one statement.
func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	q := fmt.Sprintf(`WITH g AS (
	SELECT partitions FROM %[1]s WHERE name = $1
), kept AS (
	SELECT member, expires_at FROM %[2]s WHERE false
), renewed AS (
	SELECT * FROM %[3]s WHERE false
), notified AS (
	SELECT 1 WHERE false
)`+s.groupTail(), s.groups, s.members, s.table)
	g, err := s.queryGroup(ctx, q, group, "")
	if err != nil {
		return lease.Group{}, s.wrap(fmt.Sprintf("get group %q", group), err)
	}
	return g, nil
}

// Leave implements lease.Store: it deletes the member's record and
// notifies in one statement.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	q := fmt.Sprintf(`WITH gone AS (
	DELETE FROM %s WHERE grp = $1 AND member = $2 RETURNING grp
)
SELECT gone.grp FROM gone CROSS JOIN LATERAL pg_notify($3, gone.grp) AS notified`, s.members)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		var got string
		return conn.QueryRow(ctx, q, group, member, s.channel).Scan(&got)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // not a member
	}
	return s.wrap(fmt.Sprintf("leave group %q", group), err)
}

// queryGroup runs a group statement and assembles its rows; it returns
// lease.ErrNotFound when they hold no 'g' row.
func (s *Store) queryGroup(ctx context.Context, q string, args ...any) (lease.Group, error) {
	var (
		g     lease.Group
		found bool
		recs  map[int]lease.Record
	)
	err := s.do(ctx, func(conn *pgx.Conn) error {
		g, found, recs = lease.Group{Name: args[0].(string)}, false, map[int]lease.Record{}
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				kind   string
				n      int
				member *string
				us     *int64
			)
			rec, ok, err := scanNullableRecord(rows, &kind, &n, &member, &us)
			if err != nil {
				return err
			}
			switch kind {
			case "g":
				found, g.Partitions = true, n
			case "m":
				if member != nil && us != nil {
					g.Members = append(g.Members, lease.Member{Identity: *member, Remaining: time.Duration(*us) * time.Microsecond})
				}
			case "p":
				if ok {
					recs[n] = rec
				}
			}
		}
		return rows.Err()
	})
	if err != nil {
		return lease.Group{}, err
	}
	if !found {
		return lease.Group{}, lease.ErrNotFound
	}
	g.Leases = make([]lease.Record, g.Partitions)
	for p := range g.Leases {
		if rec, ok := recs[p]; ok {
			g.Leases[p] = rec
		} else {
			g.Leases[p].Name = lease.PartitionKey(g.Name, p)
		}
	}
	slices.SortFunc(g.Members, func(a, b lease.Member) int { return strings.Compare(a.Identity, b.Identity) })
	return g, nil
}
