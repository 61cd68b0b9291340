package elect_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestElectorValidation: an Elector whose durations cannot work is refused,
// by Validate and by Campaign before it calls the store. With a zero
// RetryPeriod, Campaign would otherwise retry without ever sleeping: a hot
// loop against the store.
func TestElectorValidation(t *testing.T) {
	valid := func(m lease.Store) elect.Elector {
		return elect.Elector{Store: m, Name: "relay", Holder: "a",
			LeaseDuration: ttl, RenewDeadline: deadline, RetryPeriod: interval}
	}
	for _, tc := range []struct {
		name   string
		change func(*elect.Elector)
		want   string // in the error; "" for a valid Elector
	}{
		{"valid", func(*elect.Elector) {}, ""},
		{"no store", func(e *elect.Elector) { e.Store = nil }, "Store"},
		{"no name", func(e *elect.Elector) { e.Name = "" }, "Name"},
		{"no holder", func(e *elect.Elector) { e.Holder = "" }, "identity"},
		{"zero retry period", func(e *elect.Elector) { e.RetryPeriod = 0 }, "RetryPeriod"},
		{"negative retry period", func(e *elect.Elector) { e.RetryPeriod = -time.Second }, "RetryPeriod"},
		{"zero renew deadline", func(e *elect.Elector) { e.RenewDeadline = 0 }, "RenewDeadline"},
		{"negative renew deadline", func(e *elect.Elector) { e.RenewDeadline = -time.Second }, "RenewDeadline"},
		{"renew deadline equal to retry period", func(e *elect.Elector) { e.RenewDeadline = e.RetryPeriod }, "RenewDeadline"},
		{"zero lease duration", func(e *elect.Elector) { e.LeaseDuration = 0 }, "LeaseDuration"},
		{"negative lease duration", func(e *elect.Elector) { e.LeaseDuration = -time.Second }, "LeaseDuration"},
		{"lease duration equal to renew deadline", func(e *elect.Elector) { e.LeaseDuration = e.RenewDeadline }, "LeaseDuration"},
		{"all zero", func(e *elect.Elector) { e.LeaseDuration, e.RenewDeadline, e.RetryPeriod = 0, 0, 0 }, "RetryPeriod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The name is held by another, so that a Campaign that went
			// ahead would retry rather than return a tenure at once.
			m := &countingStore{Memory: &leasetest.Memory{}}
			if _, err := m.Memory.Acquire(context.Background(), "relay", "other", time.Hour); err != nil {
				t.Fatal(err)
			}
			e := valid(m)
			tc.change(&e)

			err := e.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.want)
			}
			if e.Store == nil {
				return // nothing to count calls on
			}

			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			ten, cerr := e.Campaign(ctx)
			if ten != nil {
				ten.Release(context.Background())
			}
			if got := m.acquires.Load(); got != 0 {
				t.Errorf("Campaign called Acquire %d times in 200ms (returned %v), want none", got, cerr)
			}
			if cerr == nil || errors.Is(cerr, context.DeadlineExceeded) || cerr.Error() != err.Error() {
				t.Errorf("Campaign() = %v, want Validate's error %q at once", cerr, err)
			}
		})
	}
}
