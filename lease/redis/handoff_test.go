package redis

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// TestHandoffLatency measures a graceful hand-off as the election does it:
// a follower refused by the holder waits on the record it was refused
// with, and acquires when woken; the time from the leader's Release call
// to the follower's successful Acquire is logged as p50 and p99 over the
// runs. Speed is not asserted beyond "woken, not timed out".
func TestHandoffLatency(t *testing.T) {
	dsn, _ := newPrefix(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	const runs = 40
	var lags []time.Duration
	for range runs {
		rec, err := leader.Acquire(ctx, "n", "leader", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		acquired := make(chan lease.Record, 1)
		go func() {
			for {
				got, err := follower.Acquire(ctx, "n", "follower", time.Minute)
				var held *lease.HeldError
				switch {
				case err == nil:
					acquired <- got
					return
				case errors.As(err, &held):
					if err := follower.Wait(ctx, "n", held.Record, held.Record.Remaining); err != nil {
						t.Error(err)
						return
					}
				default:
					t.Error(err)
					return
				}
			}
		}()
		subscribed(t, follower, "n")
		released := time.Now()
		if err := leader.Release(ctx, "n", "leader", rec.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-acquired:
			lags = append(lags, time.Since(released))
			if err := follower.Release(ctx, "n", "follower", got.Token); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the follower did not acquire within 10s of the release")
		}
	}
	slices.Sort(lags)
	t.Logf("release → follower's acquire over %d runs: p50 %v, p99 %v, max %v", runs,
		lags[len(lags)/2].Round(time.Microsecond), lags[len(lags)*99/100].Round(time.Microsecond), lags[len(lags)-1].Round(time.Microsecond))
}
