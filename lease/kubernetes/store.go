package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/leaderrun/leaderrun/lease"
)

// Store is a lease.Store on coordination.k8s.io/v1 Leases in one
// namespace. Its methods are safe for concurrent use.
type Store struct {
	describe  string
	namespace string
	client    clients
	clock     *serverClock
	creds     *credentials // scrubbed from every error (apiError)

	mu       sync.Mutex               // guards written, observed and changed
	written  map[string]*writtenLease // Lease name → the Lease as this handle last wrote it
	observed map[string]observation   // Lease name → a foreign holder's Lease as first seen
	changed  map[string]chan struct{} // Lease name → closed and replaced when the informer sees it change

	watchOnce sync.Once
	informed  cache.Store   // the informer's copies of the namespace's Leases; set by watchOnce
	synced    chan struct{} // closed once the informer has listed; set by watchOnce

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	stop      chan struct{} // closed by Close: ends the informer
}

var _ lease.Store = (*Store)(nil)

// writtenLease is a Lease this handle wrote, which Renew tries to update
// without reading it first.
type writtenLease struct{ lease *coordv1.Lease }

// observation is when this handle first saw a foreign holder's Lease in
// the state fingerprint (local boot clock).
type observation struct {
	fingerprint string
	since       time.Duration
}

// maxConflicts bounds the retries of one operation whose write keeps
// meeting another's.
const maxConflicts = 50

func (s *Store) leases() leaseClient {
	return leaseClient{rc: s.client.coord, namespace: s.namespace}
}

// target says where name lives: in its own Lease, or as partition p of a
// group's Lease.
type target struct {
	name      string
	object    string // the Lease's name
	group     string // set for a partition
	partition int
}

func targetOf(name string) target {
	if group, p, ok := lease.SplitPartitionKey(name); ok {
		return target{name: name, object: groupLeaseName(group), group: group, partition: p}
	}
	return target{name: name, object: leaseName(name)}
}

// decideFunc decides an operation on the record cur (nil: absent);
// memberUntil is when an identity's membership of a partition's group
// ends (zero: none). It returns the record to write (nil: none) and the
// operation's error.
type decideFunc func(cur *rec, memberUntil func(string) time.Time, lo, hi time.Time) (*rec, error)

// modify runs decide on the record of t.name and writes what it returns,
// with the resourceVersion it was decided on, until the write succeeds or
// decide writes nothing. It returns the record as written (or as read,
// when nothing was written) and the earliest server time of the decision.
// With cached, it first decides on the Lease as this handle last wrote
// it, which saves a read when nobody wrote since; a decision to write
// nothing is never taken on that copy.
func (s *Store) modify(ctx context.Context, t target, cached bool, decide decideFunc) (*rec, time.Time, error) {
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
		cur, g, err := s.decode(l, t, lo)
		if err != nil {
			return nil, lo, err
		}
		memberUntil := func(id string) time.Time {
			if g == nil || g.Members[id] == 0 {
				return time.Time{}
			}
			return fromUS(g.Members[id])
		}
		next, decision := decide(cur, memberUntil, lo, hi)
		if next == nil {
			if fromCache {
				continue
			}
			return cur, lo, decision
		}
		out, err := s.write(ctx, l, t, g, next, lo)
		switch {
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			s.forget(t.object)
			continue
		case apierrors.IsNotFound(err) && l == nil:
			return nil, lo, lease.Refused(errNoNamespace(s.namespace, err))
		case err != nil:
			// The write may or may not have happened.
			s.forget(t.object)
			return nil, lo, err
		}
		s.remember(out)
		written, _, err := s.decode(out, t, lo)
		if err != nil {
			return nil, lo, err
		}
		return written, lo, decision
	}
	return nil, time.Time{}, errConflicts(t.name)
}

// decode reads t's record from l (nil: absent); for a partition it also
// returns the group.
func (s *Store) decode(l *coordv1.Lease, t target, lo time.Time) (*rec, *groupState, error) {
	if l == nil {
		return nil, nil, nil
	}
	want, kind := t.name, kindName
	if t.group != "" {
		want, kind = t.group, kindGroup
	}
	if got, ok := l.Annotations[annName]; ok && (got != want || l.Labels[labelKind] != kind) {
		return nil, nil, lease.Refused(fmt.Errorf("Lease %s/%s holds leaderrun's %s %q, not %s %q (two names whose Leases' names collide: rename one)",
			s.namespace, l.Name, l.Labels[labelKind], got, kind, want))
	}
	if t.group == "" {
		r, err := decodeName(l)
		if err != nil {
			return nil, nil, lease.Refused(err)
		}
		s.judgeForeign(l, r, lo)
		return r, nil, nil
	}
	if _, ok := l.Annotations[annGroup]; !ok {
		return nil, nil, lease.Refused(fmt.Errorf("Lease %s/%s has no annotation %s: not a leaderrun group's", s.namespace, l.Name, annGroup))
	}
	g, err := decodeGroup(l)
	if err != nil {
		return nil, nil, lease.Refused(err)
	}
	return g.Leases[t.partition], g, nil
}

// judgeForeign makes a foreign holder's Lease held until it has stayed
// unchanged, as this handle saw it, for its lease duration: its holder's
// clock wrote renewTime, and a renewing holder is never overtaken.
func (s *Store) judgeForeign(l *coordv1.Lease, r *rec, lo time.Time) {
	if !r.foreign || r.Released {
		return
	}
	fp := fmt.Sprint(r.Holder, r.AcquiredUS, r.RenewedUS, r.TTLMS)
	now := lease.BootClock()
	s.mu.Lock()
	o, ok := s.observed[l.Name]
	if !ok || o.fingerprint != fp {
		o = observation{fingerprint: fp, since: now}
		s.observed[l.Name] = o
	}
	s.mu.Unlock()
	r.heldUntilUS = us(lo.Add(r.ttl() - (now - o.since)))
}

// write creates or updates l (nil: create) with next as t's record.
func (s *Store) write(ctx context.Context, l *coordv1.Lease, t target, g *groupState, next *rec, lo time.Time) (*coordv1.Lease, error) {
	create := l == nil
	if create {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: t.object, Namespace: s.namespace}}
	} else {
		l = l.DeepCopy()
	}
	if t.group == "" {
		if !create && !next.foreign && !next.empty() && l.Annotations[annToken] != strconv.FormatInt(next.Token, 10) {
			n := int32(1)
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions + 1
			}
			l.Spec.LeaseTransitions = &n
		}
		encodeName(l, t.name, next)
	} else {
		ng := groupState{}
		if g != nil {
			ng = *g
		}
		ng.Leases = cloneMap(ng.Leases)
		if ng.Leases == nil {
			ng.Leases = map[int]*rec{}
		}
		ng.Leases[t.partition] = next
		encodeGroup(l, t.group, &ng, lo)
	}
	if create {
		return s.leases().Create(ctx, l)
	}
	return s.leases().Update(ctx, l)
}

func (s *Store) lastWritten(object string) *coordv1.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.written[object]; w != nil {
		return w.lease
	}
	return nil
}

func (s *Store) remember(l *coordv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[l.Name] = &writtenLease{lease: l}
}

func (s *Store) forget(object string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, object)
}

func (s *Store) fail(op, name string, err error) error {
	if err == nil || errors.Is(err, lease.ErrClosed) || errors.Is(err, lease.ErrLost) ||
		errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrNotHeld) ||
		errors.Is(err, lease.ErrUnknownSuccessor) || errors.Is(err, lease.ErrAlreadyLeader) ||
		errors.Is(err, lease.ErrTokenAhead) {
		return err
	}
	var held *lease.HeldError
	var parts *lease.PartitionsError
	if errors.As(err, &held) || errors.As(err, &parts) {
		return err
	}
	return s.apiError(fmt.Sprintf("%s %q", op, name), err)
}

func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "acquire", name, holder, nil, ttl)
}

func (s *Store) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return s.grant(ctx, "seize", name, holder, &dead, ttl)
}

func (s *Store) grant(ctx context.Context, op, name, holder string, dead *lease.Record, ttl time.Duration) (lease.Record, error) {
	if err := lease.CheckIdentity(holder); err != nil {
		return lease.Record{}, err
	}
	t := targetOf(name)
	r, lo, err := s.modify(ctx, t, false, func(cur *rec, _ func(string) time.Time, lo, hi time.Time) (*rec, error) {
		return grant(cur, name, holder, dead, ttl, lo, hi)
	})
	if err != nil {
		return lease.Record{}, s.fail(op, name, err)
	}
	return r.view(name, lo), nil
}

func (s *Store) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	t := targetOf(name)
	r, lo, err := s.modify(ctx, t, true, func(cur *rec, _ func(string) time.Time, _, hi time.Time) (*rec, error) {
		return renew(cur, holder, token, ttl, hi)
	})
	if err != nil {
		return lease.Record{}, s.fail("renew", name, err)
	}
	return r.view(name, lo), nil
}

func (s *Store) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	_, _, err := s.modify(ctx, targetOf(name), true, func(cur *rec, _ func(string) time.Time, _, hi time.Time) (*rec, error) {
		return annotate(cur, holder, token, where, hi)
	})
	return s.fail("annotate", name, err)
}

func (s *Store) Release(ctx context.Context, name, holder string, token int64) error {
	_, _, err := s.modify(ctx, targetOf(name), true, func(cur *rec, _ func(string) time.Time, _, hi time.Time) (*rec, error) {
		return release(cur, holder, token, hi)
	})
	return s.fail("release", name, err)
}

func (s *Store) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	var out lease.Record
	_, _, err := s.modify(ctx, targetOf(name), false, func(cur *rec, memberUntil func(string) time.Time, lo, hi time.Time) (*rec, error) {
		next, view, err := stepDown(cur, name, successor, memberUntil(successor), window, lo, hi)
		out = view
		return next, err
	})
	if err != nil {
		return lease.Record{}, s.fail("step-down", name, err)
	}
	return out, nil
}

func (s *Store) Get(ctx context.Context, name string) (lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Record{}, err
	}
	l, err := s.leases().Get(ctx, targetOf(name).object)
	if apierrors.IsNotFound(err) {
		return lease.Record{}, lease.ErrNotFound
	}
	if err != nil {
		return lease.Record{}, s.fail("get", name, err)
	}
	return s.recordOf(l, name)
}

// recordOf is name's record in l (nil: absent), or ErrNotFound.
func (s *Store) recordOf(l *coordv1.Lease, name string) (lease.Record, error) {
	if l == nil {
		return lease.Record{}, lease.ErrNotFound
	}
	lo, _ := s.clock.bounds()
	r, _, err := s.decode(l, targetOf(name), lo)
	if err != nil {
		return lease.Record{}, err
	}
	if r == nil || r.empty() {
		return lease.Record{}, lease.ErrNotFound
	}
	return r.view(name, lo), nil
}

func (s *Store) List(ctx context.Context) ([]lease.Record, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return nil, err
	}
	list, err := s.leases().List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy})
	if err != nil {
		return nil, s.apiError("list leases", err)
	}
	lo, _ := s.clock.bounds()
	var recs []lease.Record
	for i := range list.Items {
		l := &list.Items[i]
		name := l.Annotations[annName]
		switch l.Labels[labelKind] {
		case kindName:
			r, _, err := s.decode(l, target{name: name, object: l.Name}, lo)
			if err != nil {
				return nil, err
			}
			if !r.empty() {
				recs = append(recs, r.view(name, lo))
			}
		case kindGroup:
			g, err := decodeGroup(l)
			if err != nil {
				return nil, lease.Refused(err)
			}
			for p, r := range g.Leases {
				if r != nil && !r.empty() {
					recs = append(recs, r.view(lease.PartitionKey(name, p), lo))
				}
			}
		}
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

func (s *Store) Describe() string { return s.describe }

// Close ends the handle's watch and its Waits. It releases no lease.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		close(s.stop)
	})
	return nil
}
