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
			Open:   func(*testing.T) lease.Store { return m.Handle() },
			Delete: func(_ *testing.T, name string) { m.Delete(name) },
		}
	})
}

func TestModel(t *testing.T) {
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(*testing.T) leasetest.ModelStore {
			m := &leasetest.Memory{}
			clock := leasetest.NewVirtualClock()
			m.SetClock(clock.Read)
			return leasetest.ModelStore{Store: m, Clock: clock, Plant: func(_ *testing.T, rec lease.Record) { m.Put(rec) }}
		},
	})
}
