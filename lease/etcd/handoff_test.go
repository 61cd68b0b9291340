package etcd

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// TestHandOffLatency measures, over many rounds, how long a follower that
// waits as the Elector does (refused, then Wait on what it saw) takes to
// hold the name after the holder released it, once the follower waits on
// its watch: the release, the watch's wake-up and one Acquire. It asserts
// only that the follower was woken, not polled; the numbers are logged for
// the documentation.
func TestHandOffLatency(t *testing.T) {
	c, prefix := newPrefix(t)
	dsn := dsnFor(prefix, c.Endpoints()...)
	stores := [2]*Store{openStore(t, dsn), openStore(t, dsn)}
	holders := [2]string{"a", "b"}
	waiting := make(chan struct{}, 1)
	for _, s := range stores {
		s.waiting = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}
	const rounds = 25
	rec, err := stores[0].Acquire(testCtx(t), "n", holders[0], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var lags []time.Duration
	for i := range rounds {
		leader, follower := i%2, 1-i%2
		_, err := stores[follower].Acquire(testCtx(t), "n", holders[follower], time.Minute)
		var held *lease.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("follower's Acquire = %v, want *lease.HeldError", err)
		}
		acquired := make(chan lease.Record, 1)
		go func() {
			seen := held.Record
			for {
				if err := stores[follower].Wait(testCtx(t), "n", seen, held.Record.Remaining); err != nil {
					t.Error(err)
					close(acquired)
					return
				}
				got, err := stores[follower].Acquire(testCtx(t), "n", holders[follower], time.Minute)
				if err == nil {
					acquired <- got
					return
				}
				if !errors.As(err, &held) {
					t.Error(err)
					close(acquired)
					return
				}
				seen = held.Record
			}
		}()
		select {
		case <-waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("the follower did not wait")
		}
		released := time.Now()
		if err := stores[leader].Release(testCtx(t), "n", holders[leader], rec.Token); err != nil {
			t.Fatal(err)
		}
		var ok bool
		select {
		case rec, ok = <-acquired:
			if !ok {
				t.FailNow()
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the follower did not acquire the released name")
		}
		lags = append(lags, time.Since(released))
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("release → follower's acquire over %d rounds: p50 %v, p99 %v, max %v",
		rounds, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), lags[len(lags)-1].Round(100*time.Microsecond))
	if p50 > time.Second {
		t.Errorf("median hand-off %v: the follower was not woken by the release", p50)
	}
}

// TestExpiryWakesFollower checks that a follower waiting on a name whose
// holder stopped renewing takes it as soon as etcd deletes the expired
// tenure's lease key — its watch sees the deletion — and not at the
// Remaining it computed, which is an upper bound (whole seconds, plus
// etcd's revocation delay): its Wait's timeout here is ten times that.
// Crash failover on etcd is therefore the lease's own expiry, L after the
// holder's last keep-alive, plus etcd's revocation delay; the numbers are
// logged.
func TestExpiryWakesFollower(t *testing.T) {
	c, prefix := newPrefix(t)
	dsn := dsnFor(prefix, c.Endpoints()...)
	holder, follower := openStore(t, dsn), openStore(t, dsn)
	const ttl = 2 * time.Second
	rec, err := holder.Acquire(testCtx(t), "n", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	lastRenew := time.Now()
	if _, err := holder.Renew(testCtx(t), "n", "a", rec.Token, ttl); err != nil {
		t.Fatal(err)
	}
	// From now on the holder is silent, as if SIGKILLed.
	admin := c.Client(t)
	deleted := make(chan time.Time, 1)
	wctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	events := admin.Watch(wctx, follower.keysOf("n").lease)
	go func() {
		for resp := range events {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					deleted <- time.Now()
					return
				}
			}
		}
	}()
	var remaining time.Duration
	var got lease.Record
	for got.Holder != "b" {
		got, err = follower.Acquire(testCtx(t), "n", "b", ttl)
		var held *lease.HeldError
		switch {
		case err == nil:
		case errors.As(err, &held):
			if remaining == 0 {
				remaining = held.Record.Remaining
			}
			if err := follower.Wait(testCtx(t), "n", held.Record, 10*held.Record.Remaining); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal(err)
		}
	}
	took := time.Now()
	var at time.Time
	select {
	case at = <-deleted:
	case <-time.After(10 * time.Second):
		t.Fatal("no deletion of the lease key was seen")
	}
	t.Logf("holder silent since its last renewal; etcd deleted the lease key %v after it (TTL %v); the follower held the name %v after the deletion (its first refusal said Remaining %v)",
		at.Sub(lastRenew).Round(time.Millisecond), ttl, took.Sub(at).Round(100*time.Microsecond), remaining.Round(time.Millisecond))
	if lag := took.Sub(at); lag > 300*time.Millisecond {
		t.Errorf("the follower took the name %v after etcd deleted the expired lease key, want at once (woken by its watch)", lag)
	}
	if got.Token <= rec.Token {
		t.Errorf("token %d after %d", got.Token, rec.Token)
	}
}
