package leasetest_test

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestMemoryConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		m := &leasetest.Memory{}
		return leasetest.Harness{
			Open:   func(*testing.T) lease.Store { return shared{m} },
			Delete: func(_ *testing.T, name string) { m.Delete(name) },
		}
	})
}

// shared is a handle whose Close leaves the shared Memory open.
type shared struct{ *leasetest.Memory }

func (shared) Close() error { return nil }
