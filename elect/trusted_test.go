package elect_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestTrustedReadsTheClockItself: a holder continued after a stop asks
// Trusted before its command's tree runs again, and must learn that the
// deadline passed before the tenure's own goroutine has woken to notice.
// While renewals succeed, the deadline moves with them.
func TestTrustedReadsTheClockItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Memory: &leasetest.Memory{}}
		clock := newFakeClock()
		ten := campaign(t, elector(s, "a", clock))
		defer ten.Release(context.Background())
		time.Sleep(deadline + interval/2) // past the first deadline, renewed meanwhile
		if !ten.Trusted() {
			t.Fatalf("Trusted = false at %v with every renewal answered", clock.now())
		}
		clock.jump.Store(int64(time.Hour)) // stopped for an hour
		if ten.Trusted() {
			t.Errorf("Trusted = true an hour past the deadline")
		}
		if err := ten.Context().Err(); err != nil {
			t.Fatalf("the tenure had ended already (%v): the test proves nothing", err)
		}
	})
}
