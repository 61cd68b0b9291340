package kubernetes

import (
	"testing"
	"time"
)

// TestClockBoundsHoldTheServersTime feeds the estimate responses from a
// server whose clock is the local one plus offset, handled at random
// moments between send and receipt, with Date truncated to the second as
// HTTP sends it: the bounds always hold the true offset, and once a Date
// has ticked between two close requests they are about a round trip
// apart.
func TestClockBoundsHoldTheServersTime(t *testing.T) {
	const offset = 1_700_000_000_123_456_789 * time.Nanosecond
	const rtt = 3 * time.Millisecond
	var c serverClock
	local := 5 * time.Second
	for i := range 200 {
		send := local
		handled := send + rtt/3
		recv := send + rtt
		server := time.Unix(0, int64(handled+offset))
		c.observe(send, recv, server.Truncate(time.Second))
		if c.lo > offset || c.hi < offset {
			t.Fatalf("after response %d: offset %v outside [%v, %v]", i, offset, c.lo, c.hi)
		}
		local += 10 * time.Millisecond
	}
	if w := c.hi - c.lo; w > 2*rtt+10*time.Millisecond {
		t.Errorf("bounds %v apart after 2 s of responses 10 ms apart, want about a round trip", w)
	}
}

// TestClockStepStartsAgain: a server whose clock was stepped gives
// responses outside the bounds; the estimate follows it.
func TestClockStepStartsAgain(t *testing.T) {
	var c serverClock
	c.observe(0, time.Millisecond, time.Unix(1000, 0))
	c.observe(2*time.Second, 2*time.Second+time.Millisecond, time.Unix(5000, 0))
	// At local 2 s the server read at least 5000 s less the round trip.
	if lo := time.Unix(0, int64(2*time.Second+c.lo)); lo.Before(time.Unix(5000, 0).Add(-time.Millisecond)) {
		t.Errorf("after a step to 5000 s, lower bound %v", lo.UTC())
	}
}
