package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// A group's partition leases are ordinary lease records named by
// lease.PartitionKey; the group's hash holds its number of partitions and a
// sorted set its members with their expiry. Join, RenewMember, Leave and
// GetGroup are one script each (group.lua and the operation's own), which
// builds the partitions' keys from a stem (see keys.partitionStem), so that
// a renewal round is one EVALSHA whatever the number of partitions or
// claims.

// Join implements lease.Store in one script.
func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("join group %q", group)
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, fmt.Errorf("%s: %w", op, err)
	}
	if ttl <= 0 {
		return lease.Group{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	reply, err := s.runGroup(ctx, s.scripts.join, false, group, partitions, member, ttl.Microseconds())
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	g, ok, err := decodeGroup(group, reply)
	switch {
	case err != nil:
		return lease.Group{}, s.wrap(op, err)
	case !ok:
		return lease.Group{}, fmt.Errorf("%s: %w", op, &lease.PartitionsError{Group: group, Have: g.Partitions, Want: partitions})
	}
	return g, nil
}

// RenewMember implements lease.Store in one script, whatever the number of
// claims. It also forgets members that expired more than a ttl ago.
func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	op := fmt.Sprintf("renew member %q of group %q", member, group)
	if ttl <= 0 {
		return lease.Group{}, fmt.Errorf("%s: %w", op, errTTL)
	}
	args := make([]any, 0, 2+2*len(claims))
	args = append(args, member, ttl.Microseconds())
	for _, c := range claims {
		args = append(args, c.Partition, c.Token)
	}
	reply, err := s.runGroup(ctx, s.scripts.renewMember, true, group, args...)
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	g, ok, err := decodeGroup(group, reply)
	switch {
	case err != nil:
		return lease.Group{}, s.wrap(op, err)
	case !ok:
		return lease.Group{}, lease.ErrNotFound
	}
	return g, nil
}

// Leave implements lease.Store: it removes the member and publishes the
// group's name in one script.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	_, err := s.runGroup(ctx, s.scripts.leave, false, group, member)
	return s.wrap(fmt.Sprintf("leave group %q", group), err)
}

// GetGroup implements lease.Store in one script.
func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	op := fmt.Sprintf("get group %q", group)
	reply, err := s.runGroup(ctx, s.scripts.getGroup, false, group)
	if err != nil {
		return lease.Group{}, s.wrap(op, err)
	}
	g, ok, err := decodeGroup(group, reply)
	switch {
	case err != nil:
		return lease.Group{}, s.wrap(op, err)
	case !ok:
		return lease.Group{}, lease.ErrNotFound
	}
	return g, nil
}

// runGroup runs a group script with group.lua's keys and arguments
// followed by args.
func (s *Store) runGroup(ctx context.Context, script *goredis.Script, durable bool, group string, args ...any) ([]any, error) {
	return s.run(ctx, script, durable, []string{s.keys.group(group), s.keys.members(group)},
		append([]any{s.keys.partitionStem("lease", group), group, s.channel}, args...)...)
}

// decodeGroup decodes a group script's reply {status, now, n, members,
// leases}; ok reports status 1. A reply {0, now, n} (Join: another number
// of partitions) returns a Group with only Partitions set.
func decodeGroup(group string, reply []any) (g lease.Group, ok bool, err error) {
	g.Name = group
	if len(reply) < 2 {
		return g, false, fmt.Errorf("unexpected reply %v", reply)
	}
	status, err := replyInt(reply[0])
	if err != nil {
		return g, false, err
	}
	now, err := replyInt(reply[1])
	if err != nil {
		return g, false, err
	}
	if len(reply) > 2 {
		n, err := replyInt(reply[2])
		if err != nil {
			return g, false, err
		}
		g.Partitions = int(n)
	}
	if status != 1 {
		return g, false, nil
	}
	if len(reply) != 5 {
		return g, false, fmt.Errorf("unexpected reply %v", reply)
	}
	members, ok1 := reply[3].([]any)
	leases, ok2 := reply[4].([]any)
	if !ok1 || !ok2 || len(members)%2 != 0 || len(leases) != g.Partitions {
		return g, false, fmt.Errorf("unexpected group reply %v", reply)
	}
	for i := 0; i < len(members); i += 2 {
		id, ok := members[i].(string)
		exp, err := replyInt(members[i+1])
		if !ok || err != nil {
			return g, false, fmt.Errorf("unexpected member %v %v", members[i], members[i+1])
		}
		g.Members = append(g.Members, lease.Member{Identity: id, Remaining: time.Duration(exp-now) * time.Microsecond})
	}
	slices.SortFunc(g.Members, func(a, b lease.Member) int { return strings.Compare(a.Identity, b.Identity) })
	g.Leases = make([]lease.Record, g.Partitions)
	for p, v := range leases {
		rec, found, err := decodeRecord(v, now)
		if err != nil {
			return g, false, err
		}
		if !found {
			rec = lease.Record{Name: lease.PartitionKey(group, p)}
		}
		g.Leases[p] = rec
	}
	return g, true, nil
}
