package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// TestNotificationFloodCostsFewReads: a waiter flooded with notifications
// (anyone may NOTIFY or PUBLISH) reads the store at most once per
// lease.RereadGap, and returns only when the state did change.
func TestNotificationFloodCostsFewReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wake := make(chan struct{}, 1)
		stop := make(chan struct{})
		go func() { // a notification every millisecond
			for {
				select {
				case wake <- struct{}{}:
				default:
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		defer close(stop)
		up := make(chan struct{})
		n := lease.Notified{Wake: wake, Closed: make(chan struct{}), Poll: time.Second,
			State: func() lease.Notice { return lease.Notice{Up: true, Epoch: 1, Changed: up} }}
		var reads atomic.Int32
		const changesAt = 5 * time.Second
		start := time.Now()
		err := n.Loop(context.Background(), time.Minute, func(context.Context) (bool, error) {
			reads.Add(1)
			return time.Since(start) >= changesAt, nil
		})
		if err != nil {
			t.Fatalf("Loop: %v", err)
		}
		if got := time.Since(start); got < changesAt || got > changesAt+lease.RereadGap {
			t.Errorf("Loop returned after %v, want within %v of the change at %v", got, lease.RereadGap, changesAt)
		}
		if got, limit := reads.Load(), int32(changesAt/lease.RereadGap)+2; got > limit {
			t.Errorf("%d reads in %v of a notification flood, want at most %d", got, changesAt, limit)
		}
	})
}

// TestNotificationSoonAfterFirstReadIsReadAtOnce: the gap between reads
// applies between reads that notifications caused, not after a waiter's
// first read: a release notified right after the step-down request that
// started the waiter's Wait is seen at once.
func TestNotificationSoonAfterFirstReadIsReadAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wake := make(chan struct{}, 1)
		n := lease.Notified{Wake: wake, Closed: make(chan struct{}), Poll: time.Second,
			State: func() lease.Notice { return lease.Notice{Up: true, Epoch: 1, Changed: make(chan struct{})} }}
		const notifiedAt = 5 * time.Millisecond
		go func() {
			time.Sleep(notifiedAt)
			wake <- struct{}{}
		}()
		var reads atomic.Int32
		start := time.Now()
		err := n.Loop(context.Background(), time.Minute, func(context.Context) (bool, error) {
			return reads.Add(1) > 1, nil
		})
		if err != nil {
			t.Fatalf("Loop: %v", err)
		}
		if got := time.Since(start); got != notifiedAt {
			t.Errorf("Loop returned after %v, want at the notification (%v)", got, notifiedAt)
		}
	})
}
