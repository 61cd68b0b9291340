package kubernetes

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderrun/leaderrun/lease"
)

// A group lives in one Lease of its own (groupLeaseName): its number of
// partitions, its members' expiries and every partition's record, so that
// a member's renewal round is one update whatever the number of
// partitions.

// modifyGroup is modify for a whole group: decide returns the group to
// write (nil: none).
func (s *Store) modifyGroup(ctx context.Context, group string, cached bool, decide func(cur *groupState, lo, hi time.Time) (*groupState, error)) (*groupState, time.Time, error) {
	t := target{name: group, object: groupLeaseName(group), group: group}
	var out *groupState
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, time.Time{}, err
	}
	for range maxConflicts {
		var l *coordv1.Lease
		if cached {
			l, cached = s.lastWritten(t.object), false
		}
		fromCache := l != nil
		if l == nil {
			got, err := s.leases().Get(ctx, t.object)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil, time.Time{}, err
			default:
				l = got
			}
		}
		lo, hi := s.clock.bounds()
		var cur *groupState
		if l != nil {
			_, g, err := s.decode(l, t, lo)
			if err != nil {
				return nil, lo, err
			}
			cur = g
		}
		next, decision := decide(cur, lo, hi)
		if next == nil {
			if fromCache {
				continue
			}
			return cur, lo, decision
		}
		written, err := s.writeGroup(ctx, l, group, next, lo)
		switch {
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			s.forget(t.object)
			continue
		case apierrors.IsNotFound(err) && l == nil:
			return nil, lo, lease.Refused(errNoNamespace(s.namespace, err))
		case err != nil:
			s.forget(t.object)
			return nil, lo, err
		}
		s.remember(written)
		if _, out, err = s.decode(written, t, lo); err != nil {
			return nil, lo, err
		}
		return out, lo, decision
	}
	return nil, time.Time{}, errConflicts(group)
}

func (s *Store) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, err
	}
	g, lo, err := s.modifyGroup(ctx, group, false, func(cur *groupState, _, hi time.Time) (*groupState, error) {
		return join(cur, group, partitions, member, ttl, hi)
	})
	if err != nil {
		return lease.Group{}, s.fail("join group", group, err)
	}
	return g.view(group, lo), nil
}

func (s *Store) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	g, lo, err := s.modifyGroup(ctx, group, true, func(cur *groupState, _, hi time.Time) (*groupState, error) {
		if cur != nil {
			if err := lease.CheckClaims(group, cur.Partitions, claims); err != nil && cur.Partitions > 0 {
				return nil, err
			}
		}
		return renewMember(cur, member, claims, ttl, hi)
	})
	if err != nil {
		return lease.Group{}, s.fail("renew member of group", group, err)
	}
	return g.view(group, lo), nil
}

func (s *Store) Leave(ctx context.Context, group, member string) error {
	_, _, err := s.modifyGroup(ctx, group, false, func(cur *groupState, _, _ time.Time) (*groupState, error) {
		return leave(cur, member), nil
	})
	return s.fail("leave group", group, err)
}

func (s *Store) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	l, err := s.leases().Get(ctx, groupLeaseName(group))
	if apierrors.IsNotFound(err) {
		return lease.Group{}, lease.ErrNotFound
	}
	if err != nil {
		return lease.Group{}, s.fail("get group", group, err)
	}
	return s.groupOf(l, group)
}

// groupOf is group in l (nil: absent), or ErrNotFound.
func (s *Store) groupOf(l *coordv1.Lease, group string) (lease.Group, error) {
	if l == nil {
		return lease.Group{}, lease.ErrNotFound
	}
	lo, _ := s.clock.bounds()
	_, g, err := s.decode(l, target{name: group, object: groupLeaseName(group), group: group}, lo)
	if err != nil {
		return lease.Group{}, err
	}
	if g.Partitions == 0 {
		return lease.Group{}, lease.ErrNotFound
	}
	return g.view(group, lo), nil
}

// writeGroup creates or updates l (nil: create) with g.
func (s *Store) writeGroup(ctx context.Context, l *coordv1.Lease, group string, g *groupState, lo time.Time) (*coordv1.Lease, error) {
	if l == nil {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: groupLeaseName(group), Namespace: s.namespace}}
		encodeGroup(l, group, g, lo)
		return s.leases().Create(ctx, l)
	}
	l = l.DeepCopy()
	encodeGroup(l, group, g, lo)
	return s.leases().Update(ctx, l)
}
