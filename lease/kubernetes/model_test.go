package kubernetes

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// on virtual clocks: every handle takes a clock of the test's for its
// estimate of the API server's, exactly (the server itself keeps no time
// on a Lease). Durations are whole seconds, as a name's Lease keeps them
// (leaseDurationSeconds: a ttl is rounded up to one).
func TestModel(t *testing.T) {
	srv, _ := admin(t)
	ns := namespace(t)
	kubeconfig := srv.Kubeconfig(t, kubetest.AdminToken, "")
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			s, err := Open(testCtx(t), "k8s://"+ns+"?kubeconfig="+kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			clock := leasetest.NewVirtualClock()
			s.clock = &serverClock{virtual: clock.Read}
			return leasetest.ModelStore{Store: s, Clock: clock, Plant: func(t *testing.T, planted lease.Record) {
				// As an operator would edit the Lease: the record replaced,
				// its candidates kept.
				at := us(planted.Expires.Add(-time.Second))
				_, _, err := s.modify(testCtx(t), targetOf(planted.Name), false,
					func(cur *rec, _ func(string) time.Time, _, _ time.Time) (*rec, error) {
						next := &rec{Holder: planted.Holder, Token: planted.Token, AcquiredUS: at, RenewedUS: at,
							TTLMS: 1000, Released: planted.Released}
						if cur != nil {
							next.Candidates, next.attrs = cur.Candidates, cur.attrs
						}
						return next, nil
					})
				if err != nil {
					t.Fatal(err)
				}
			}}
		},
		KeepsFresh: true,
		TTLs:       []time.Duration{time.Second, 2 * time.Second, 5 * time.Second},
		Windows:    []time.Duration{400 * time.Millisecond, 1500 * time.Millisecond},
		Steps:      []time.Duration{time.Millisecond, 30 * time.Millisecond, 200 * time.Millisecond, time.Second},
		Sequences:  200,
		Parallel:   8,
	})
}
