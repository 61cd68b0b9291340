package etcd

import (
	"errors"
	"slices"
	"testing"
	"time"

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
