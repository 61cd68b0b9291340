package leasetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// A model's instant may lie a nanosecond after another (a candidate seen
// just after an operation); going to it must not leave the virtual clock
// where a store cannot follow (PostgreSQL keeps microseconds, SQLite
// milliseconds: CI's PostgreSQL model run of seed 4116772814823046384).
func TestVirtualClockShowsWholeMilliseconds(t *testing.T) {
	c := leasetest.NewVirtualClock()
	start := c.Read()
	for _, d := range []time.Duration{time.Nanosecond + time.Millisecond, 0, time.Microsecond, 20 * time.Millisecond} {
		c.Advance(context.Background(), d)
		if got := c.Read(); got.Truncate(time.Millisecond) != got {
			t.Fatalf("after Advance(%v) the clock reads %v from its start, not a whole millisecond", d, got.Sub(start))
		}
	}
	if got := c.Read().Sub(start); got != 23*time.Millisecond {
		t.Fatalf("the clock moved %v, want 23ms (2, then 1 for the microsecond, then 20)", got)
	}
}
