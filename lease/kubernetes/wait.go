package kubernetes

import (
	"context"
	"fmt"
	"io"
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
		// The reflector logs (klog, on stderr) why a list or watch
		// failed: with the error's text scrubbed, as apiError does.
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if err != io.EOF && err != io.ErrUnexpectedEOF {
				err = s.apiError("watch leases", err)
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
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

// cached returns the informer's copy of object, or nil when it has none.
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

// Wait and WaitGroup compare with seen the informer's copy of the Lease,
// not one read from the server: a renewal wakes every follower, and
// costs the server no read for it.

func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return lease.AwaitTenure(ctx, s.waitOn(func(name string) string { return targetOf(name).object }),
		func(_ context.Context, name string) (lease.Record, error) {
			l, err := s.cached(targetOf(name).object)
			if err != nil {
				return lease.Record{}, err
			}
			return s.recordOf(l, name)
		}, name, seen, timeout)
}

func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	return lease.AwaitGroup(ctx, s.waitOn(groupLeaseName),
		func(_ context.Context, group string) (lease.Group, error) {
			l, err := s.cached(groupLeaseName(group))
			if err != nil {
				return lease.Group{}, err
			}
			return s.groupOf(l, group)
		}, group, seen, timeout)
}

// waitOn is the store's lease.WaitFunc for keys whose Lease object names:
// it starts the informer (and waits for its first list), then calls
// changed at once and on every change of the Lease, with the wake-up
// channel taken before each call.
func (s *Store) waitOn(object func(key string) string) lease.WaitFunc {
	return func(ctx context.Context, key string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
		if err := lease.IfClosed(s.closed); err != nil {
			return err
		}
		obj := object(key)
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		// Until the informer has listed, wait for that; then for a
		// change of obj, taking the channel before each comparison.
		wake := s.watch()
		for synced := false; ; synced = true {
			if synced {
				wake = s.changedChan(obj)
				if moved, err := changed(ctx); err != nil || moved {
					return err
				}
			}
			select {
			case <-wake:
			case <-timer.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-s.closed:
				return lease.ErrClosed
			}
		}
	}
}
