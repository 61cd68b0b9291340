package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Store)(nil)

// Campaign implements lease.Campaigner: holder's candidacy, seen until
// the latest the server's clock may read + 2×ttl, ineligible until that
// + c.Ineligible (lease.Campaign), in the Lease's candidates and its
// annCandidacy annotation, written with the resourceVersion read. For a
// name that has no Lease it creates one that holds the candidates alone,
// which reads as no record. A Lease a client-go elector holds is not
// written to (nor is it by a refusal).
func (s *Store) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	switch {
	case lease.CheckIdentity(holder) != nil:
		return lease.CheckIdentity(holder)
	case ttl <= 0:
		return fmt.Errorf("campaign for %q: lease duration must be positive", name)
	case len(c.Note) > lease.MaxNote:
		return fmt.Errorf("campaign for %q: note of %d bytes, more than %d", name, len(c.Note), lease.MaxNote)
	}
	_, _, err := s.modify(ctx, targetOf(name), false, func(cur *rec, _ func(string) time.Time, _, hi time.Time) (*rec, error) {
		return campaign(cur, holder, c, ttl, hi), nil
	})
	return s.fail("campaign", name, err)
}

// Candidates implements lease.Campaigner: name's live candidates in its
// Lease as read, measured at the latest the server's clock may read, so
// that neither how long a candidate is seen nor its ineligibility reads
// longer than it was written for.
func (s *Store) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	t := targetOf(name)
	l, err := s.leases().Get(ctx, t.object)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail("candidates of", name, err)
	}
	lo, hi := s.clock.bounds()
	r, _, err := s.decode(l, t, lo)
	if err != nil || r == nil {
		return nil, s.fail("candidates of", name, err)
	}
	var out []lease.Standing
	for _, id := range slices.Sorted(maps.Keys(r.Candidates)) {
		if c := r.candidate(id); c.Live(hi) {
			out = append(out, c.Standing(hi))
		}
	}
	return out, nil
}

// Withdraw implements lease.Campaigner: holder's candidacy and what it
// said leave the Lease, written with the resourceVersion read; a holder
// that is no candidate writes nothing.
func (s *Store) Withdraw(ctx context.Context, name, holder string) error {
	_, _, err := s.modify(ctx, targetOf(name), false, func(cur *rec, _ func(string) time.Time, _, _ time.Time) (*rec, error) {
		return withdraw(cur, holder), nil
	})
	return s.fail("withdraw from", name, err)
}

// Forget implements lease.Campaigner. A name's Lease is deleted with the
// resourceVersion read as a precondition, when lease.Forgettable allows
// it at the earliest the server's clock may read (a lease ends as late,
// and the clock is as far behind a token, as it may be): it takes the
// delete verb, which Open does not ask for. A partition's record and
// candidates leave its group's Lease, written with the resourceVersion
// read. On a conflict it reads again.
func (s *Store) Forget(ctx context.Context, name string) error {
	return s.fail("forget", name, s.forgetLease(ctx, targetOf(name)))
}

func (s *Store) forgetLease(ctx context.Context, t target) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	for range maxConflicts {
		l, err := s.leases().Get(ctx, t.object)
		if apierrors.IsNotFound(err) {
			return lease.ErrNotFound
		}
		if err != nil {
			return err
		}
		lo, _ := s.clock.bounds()
		r, g, err := s.decode(l, t, lo)
		switch {
		case err != nil:
			return err
		case r == nil || r.empty():
			return lease.ErrNotFound
		}
		if err := lease.Forgettable(r.view(t.name, lo), lo); err != nil {
			return err
		}
		if t.group == "" {
			rv := l.ResourceVersion
			err = s.leases().Delete(ctx, t.object, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		} else {
			next := *g
			next.Leases = cloneMap(g.Leases)
			delete(next.Leases, t.partition)
			l = l.DeepCopy()
			encodeGroup(l, t.group, &next, lo)
			_, err = s.leases().Update(ctx, l)
		}
		s.forget(t.object)
		switch {
		case apierrors.IsConflict(err):
			continue
		case apierrors.IsNotFound(err):
			return lease.ErrNotFound
		}
		return err
	}
	return errConflicts(t.name)
}
