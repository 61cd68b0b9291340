//go:build kubernetes

package kubernetes

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/leaderrun/leaderrun/lease"
)

// Followers wait on a watch: each handle runs one informer over the Leases
// of its namespace, started by its first Wait, and every change of a Lease
// wakes the waiters of that Lease. A waiter compares the informer's copy
// with what it saw; renewals wake it, find the same tenure, and wait on.

// watch starts the informer once, and returns a channel closed once it
// has listed the Leases.
func (s *Store) watch() <-chan struct{} {
	s.watchOnce.Do(func() {
		s.synced = make(chan struct{})
		lw := cache.NewListWatchFromClient(s.client.coord, "leases", s.namespace, fields.Everything())
		inf := cache.NewSharedIndexInformer(lw, &coordv1.Lease{}, 0, cache.Indexers{})
		wake := func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if l, ok := obj.(*coordv1.Lease); ok {
				s.wake(l.Name)
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    wake,
			UpdateFunc: func(_, obj any) { wake(obj) },
			DeleteFunc: wake,
		})
		s.informed = inf.GetStore()
		go inf.Run(s.stop)
		go func() {
			if cache.WaitForCacheSync(s.stop, inf.HasSynced) {
				close(s.synced)
			}
		}()
	})
	return s.synced
}

func (s *Store) wake(object string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.changed[object]; ch != nil {
		close(ch)
		delete(s.changed, object)
	}
}

func (s *Store) changedChan(object string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.changed[object]
	if ch == nil {
		ch = make(chan struct{})
		s.changed[object] = ch
	}
	return ch
}

// cached returns the informer's copy of object, or nil.
func (s *Store) cached(object string) (*coordv1.Lease, error) {
	obj, ok, err := s.informed.GetByKey(s.namespace + "/" + object)
	if err != nil || !ok {
		return nil, err
	}
	l, ok := obj.(*coordv1.Lease)
	if !ok {
		return nil, fmt.Errorf("the watch of Leases gave a %T", obj)
	}
	return l, nil
}

func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	t := targetOf(name)
	return s.wait(ctx, t.object, timeout, func(l *coordv1.Lease, lo time.Time) (bool, error) {
		cur := lease.Record{}
		r, _, err := s.decode(l, t, lo)
		if err != nil {
			return false, err
		}
		if r != nil {
			cur = r.view(name, lo)
		}
		return !lease.SameTenure(cur, seen), nil
	})
}

func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	t := target{name: group, object: groupLeaseName(group), group: group}
	var changed lease.Group
	err := s.wait(ctx, t.object, timeout, func(l *coordv1.Lease, lo time.Time) (bool, error) {
		cur := lease.Group{}
		if l != nil {
			_, g, err := s.decode(l, t, lo)
			if err != nil {
				return false, err
			}
			if g.Partitions > 0 {
				cur = g.view(group, lo)
			}
		}
		if lease.SameGroup(cur, seen) {
			return false, nil
		}
		changed = cur
		return true, nil
	})
	if err != nil {
		return lease.Group{}, err
	}
	return changed, nil
}

// wait returns once differs reports that the informer's copy of object
// (nil: absent) differs from what the caller saw, at timeout, or with an
// error when ctx ends or the handle is closed. It checks on every change
// of object and once at the start, with the wake-up channel taken first.
func (s *Store) wait(ctx context.Context, object string, timeout time.Duration, differs func(*coordv1.Lease, time.Time) (bool, error)) error {
	if s.isClosed() {
		return lease.ErrClosed
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-s.watch():
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closed:
		return lease.ErrClosed
	}
	for {
		ch := s.changedChan(object)
		l, err := s.cached(object)
		if err != nil {
			return err
		}
		lo, _ := s.clock.bounds()
		moved, err := differs(l, lo)
		if err != nil || moved {
			return err
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return lease.ErrClosed
		}
	}
}
