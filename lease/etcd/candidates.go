package etcd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// Campaign implements lease.Campaigner: one transaction writes holder's
// candidate key, seen until now + 2×ttl as a refusal writes it, and its
// attributes key (deleted for the zero Candidacy), by this replica's
// clock as every time the store keeps (lease.Campaign). A leaderrun that
// knows no attributes reads and writes the candidate key as before; its
// candidates have no attributes key and read as the zero Candidacy.
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	op := fmt.Sprintf("campaign for lease %q", name)
	switch {
	case lease.IfClosed(s.closed) != nil:
		return lease.ErrClosed
	case ttl <= 0:
		return fmt.Errorf("%s: %w", op, errTTL)
	case len(c.Note) > lease.MaxNote:
		return fmt.Errorf("%s: note of %d bytes, more than %d", op, len(c.Note), lease.MaxNote)
	}
	k := s.keysOf(name)
	next := lease.Campaign(holder, c, ttl, time.Now())
	attrs := attrsOf(next)
	ops := []clientv3.Op{clientv3.OpPut(k.candidates+escape(holder), strconv.FormatInt(next.SeenUntil.UnixMilli(), 10))}
	if attrs == (attrsValue{}) {
		ops = append(ops, clientv3.OpDelete(k.attrs+escape(holder)))
	} else {
		ops = append(ops, clientv3.OpPut(k.attrs+escape(holder), attrs.encode()))
	}
	_, err := s.client.Txn(ctx).Then(ops...).Commit()
	return s.wrap(op, err)
}

// Candidates implements lease.Campaigner: one linearizable read of the
// candidate and attributes keys, measured by this replica's clock.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	op := fmt.Sprintf("candidates of lease %q", name)
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	k := s.keysOf(name)
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(k.candidates, clientv3.WithPrefix()),
		clientv3.OpGet(k.attrs, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, s.wrap(op, err)
	}
	st, err := parseName(k, resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	now := time.Now()
	var out []lease.Standing
	for _, c := range st.candidates {
		if m := c.model(); m.Live(now) {
			out = append(out, m.Standing(now))
		}
	}
	slices.SortFunc(out, func(a, b lease.Standing) int { return strings.Compare(a.Holder, b.Holder) })
	return out, nil
}

// Withdraw implements lease.Campaigner: one transaction deletes holder's
// candidate and attributes keys.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	k := s.keysOf(name)
	_, err := s.client.Txn(ctx).Then(
		clientv3.OpDelete(k.candidates+escape(holder)),
		clientv3.OpDelete(k.attrs+escape(holder)),
	).Commit()
	return s.wrap(fmt.Sprintf("withdraw from lease %q", name), err)
}

// Forget implements lease.Campaigner: it reads the name's keys and, when
// lease.Forgettable allows it by this replica's clock (a lease key that
// still exists counts as held, whatever its time left), deletes every
// key of the name, its candidates and their attributes in one
// transaction on the condition that the record and the lease key are as
// read; it reads again when they changed. Waiters see the record go, as
// they see a release.
func (s *Store) Forget(ctx context.Context, name string) error {
	return s.wrap(fmt.Sprintf("forget lease %q", name), s.forgetName(ctx, name))
}

func (s *Store) forgetName(ctx context.Context, name string) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	k := s.keysOf(name)
	for range maxAttempts {
		st, _, err := s.readName(ctx, k, false)
		if err != nil {
			return err
		}
		if !st.found {
			return lease.ErrNotFound
		}
		left := leaseTime{gone: true}
		if st.held() {
			id := clientv3.LeaseID(st.leaseKV.Lease)
			times, err := s.leaseTimes(ctx, []clientv3.LeaseID{id}, nil)
			if err != nil {
				return err
			}
			left = times[id]
		}
		now := time.Now()
		cur := st.view(name, now, left)
		if st.held() && cur.Remaining <= 0 {
			cur.Remaining = time.Millisecond // its etcd lease has yet to end it
		}
		if err := lease.Forgettable(cur, now); err != nil {
			return err
		}
		resp, err := s.client.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(k.record), "=", st.recRev),
			clientv3.Compare(clientv3.ModRevision(k.lease), "=", st.leaseRev()),
		).Then(
			clientv3.OpDelete(k.base, clientv3.WithPrefix()),
			clientv3.OpDelete(k.candidates, clientv3.WithPrefix()),
			clientv3.OpDelete(k.attrs, clientv3.WithPrefix()),
		).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			s.seen.forget(name)
			return nil
		}
	}
	return errContended
}
