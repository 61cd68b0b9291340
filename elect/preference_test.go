package elect_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// campaignIn campaigns for e in the background; the tenure, if any, comes
// on the channel. When the test ends the campaign is cancelled and a
// tenure it won meanwhile (a holder the test released last may have let
// it in) is released, so that no goroutine of it outlives the bubble.
func campaignIn(t *testing.T, ctx context.Context, e *elect.Elector) <-chan *elect.Tenure {
	ctx, cancel := context.WithCancel(ctx)
	got := make(chan *elect.Tenure, 1)
	go func() {
		ten, err := e.Campaign(ctx)
		if err == nil {
			got <- ten
		}
		close(got)
	}()
	t.Cleanup(func() {
		cancel()
		for ten := range got {
			ten.Release(context.Background())
		}
	})
	return got
}

// When a free name is granted to a replica while a live candidate of
// higher priority campaigns, the replica reserves the name for that
// candidate and releases it before anything starts: whichever of them
// wins the race for a released name, the higher priority leads.
func TestFreeNameGoesToTheHigherPriority(t *testing.T) {
	for _, loFirst := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := &leasetest.Memory{}
			clock := newFakeClock()
			old := campaign(t, elector(m, "old", clock))
			hiE, loE := elector(m, "hi", clock), elector(m, "lo", clock)
			hiE.Candidacy.Priority = 5
			first, second := hiE, loE
			if loFirst {
				first, second = loE, hiE
			}
			firstC := campaignIn(t, ctx, first)
			synctest.Wait()
			secondC := campaignIn(t, ctx, second)
			synctest.Wait()
			if err := old.Release(ctx); err != nil {
				t.Fatal(err)
			}
			hi, lo := firstC, secondC
			if loFirst {
				hi, lo = secondC, firstC
			}
			var ten *elect.Tenure
			select {
			case ten = <-hi:
			case ten = <-lo:
				ten.Release(context.Background())
				t.Fatal("lo led while hi campaigned")
			case <-time.After(time.Minute):
			}
			if ten == nil {
				t.Fatal("hi did not lead within a minute")
			}
			defer ten.Release(context.Background())
			time.Sleep(time.Minute)
			synctest.Wait()
			select {
			case ten := <-lo:
				t.Fatalf("lo leads (token %d) beside hi", ten.Token())
			default:
			}
			cancel()
		})
	}
}

// The deferral is bounded: when the preferred candidate does not take the
// name (it died after campaigning), the replica takes it after the
// reservation, and does not defer to the same candidate again.
func TestDeferralToADeadCandidateIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &leasetest.Memory{}
		if err := m.Campaign(ctx, "relay", "hi", lease.Candidacy{Priority: 5}, ttl); err != nil {
			t.Fatal(err)
		}
		clock := newFakeClock()
		ten := <-campaignIn(t, ctx, elector(m, "lo", clock))
		if ten == nil {
			t.Fatal("lo never took the name")
		}
		defer ten.Release(context.Background())
		if at := clock.now(); at < 2*interval || at > 2*interval+time.Second {
			t.Errorf("lo took the name at %v, want just after the reservation of 2 × the renew interval (%v)", at, 2*interval)
		}
	})
}

// An ineligible replica (its command was unhealthy here) defers a free
// name to an eligible one, even of lower priority.
func TestIneligibleDefersToEligible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &leasetest.Memory{}
		if err := m.Campaign(ctx, "relay", "well", lease.Candidacy{}, ttl); err != nil {
			t.Fatal(err)
		}
		sick := elector(m, "sick", newFakeClock())
		sick.Candidacy.Priority = 9
		if err := sick.SetIneligible(ctx, 5*time.Minute, "check failed"); err != nil {
			t.Fatal(err)
		}
		campaignIn(t, ctx, sick)
		synctest.Wait()
		if rec, err := m.Get(ctx, "relay"); err != nil || rec.Successor != "well" {
			t.Fatalf("record after sick's grant: %+v, %v; want it reserved for well", rec, err)
		}
	})
}

// A replica with Preempt and a higher priority asks the holder to step
// down for it once it has campaigned for PreemptDelay, not before; the
// holder's hand-over (release) lets it in.
func TestPreemptAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &leasetest.Memory{}
		clock := newFakeClock()
		leader := campaign(t, elector(m, "a", clock))
		p := elector(m, "p", clock)
		p.Candidacy = lease.Candidacy{Priority: 1, Preempt: true}
		p.PreemptDelay = 30 * time.Second
		joined := clock.now()
		got := campaignIn(t, ctx, p)
		<-leader.Context().Done()
		if cause := context.Cause(leader.Context()); !errors.Is(cause, elect.ErrSteppedDown) {
			t.Fatalf("leader's tenure ended with %v, want a step-down", cause)
		}
		if after := clock.now() - joined; after < p.PreemptDelay || after > p.PreemptDelay+time.Second {
			t.Errorf("asked to step down %v after p joined, want just after its preempt delay %v", after, p.PreemptDelay)
		}
		if rec, _ := leader.StepDownRequest(); rec.Successor != "p" {
			t.Errorf("step-down names successor %q, want p", rec.Successor)
		}
		if err := leader.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ten := <-got
		if ten == nil || ten.Token() <= leader.Token() {
			t.Fatal("p did not take the name after the hand-over")
		}
		ten.Release(context.Background())
	})
}

// Leadership is sticky: a later replica of higher priority without
// Preempt, or with it but not preceding the holder, does not take over.
func TestNoPreemptionWithoutTheFlagOrThePriority(t *testing.T) {
	for _, c := range []lease.Candidacy{{Priority: 5}, {Priority: 0, Preempt: true}} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := &leasetest.Memory{}
			clock := newFakeClock()
			leader := campaign(t, elector(m, "a", clock))
			defer leader.Release(context.Background())
			p := elector(m, "p", clock)
			p.Candidacy, p.PreemptDelay = c, time.Second
			campaignIn(t, ctx, p)
			time.Sleep(5 * time.Minute)
			synctest.Wait()
			if err := context.Cause(leader.Context()); err != nil {
				t.Errorf("with %+v the leader's tenure ended: %v", c, err)
			}
		})
	}
}

// Successor is the eligible live candidate of highest priority, never this
// replica itself.
func TestSuccessorIsTheEligibleHighest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &leasetest.Memory{}
		for h, c := range map[string]lease.Candidacy{
			"x": {Priority: 3, Ineligible: time.Minute}, "y": {Priority: 1}, "z": {Priority: 2}, "me": {Priority: 7},
		} {
			if err := m.Campaign(ctx, "relay", h, c, ttl); err != nil {
				t.Fatal(err)
			}
		}
		s, ok, err := elector(m, "me", newFakeClock()).Successor(ctx)
		if err != nil || !ok || s.Holder != "z" {
			t.Errorf("Successor = %+v, %v, %v; want z", s, ok, err)
		}
	})
}

// campaignCounter counts the candidacies published; while down, its
// Acquire fails as an unreachable store's would.
type campaignCounter struct {
	*leasetest.Memory
	n    atomic.Int32
	down atomic.Bool
}

func (s *campaignCounter) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if s.down.Load() {
		return lease.Record{}, errors.New("connection refused")
	}
	return s.Memory.Acquire(ctx, name, holder, ttl)
}

func (s *campaignCounter) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	s.n.Add(1)
	return s.Memory.Campaign(ctx, name, holder, c, ttl)
}

// A follower publishes its candidacy once, and its refused Acquires keep
// it live; after the store did not answer for longer than the TTL (which
// may have let a store prune it) it publishes it again. A priority-0
// follower's candidacy is its refusals alone.
func TestFollowerPublishesOnceAndAfterAGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &campaignCounter{Memory: &leasetest.Memory{}}
		clock := newFakeClock()
		leader := campaign(t, elector(s.Memory, "a", clock))
		defer leader.Release(context.Background())
		f := elector(s, "f", clock)
		f.Candidacy.Priority = 3
		campaignIn(t, ctx, f)
		time.Sleep(10 * ttl)
		synctest.Wait()
		if n := s.n.Load(); n != 1 {
			t.Fatalf("a follower at rest published its candidacy %d times in 10 TTLs, want once", n)
		}
		s.down.Store(true)
		time.Sleep(3 * ttl)
		s.down.Store(false)
		time.Sleep(ttl)
		synctest.Wait()
		if n := s.n.Load(); n != 2 {
			t.Errorf("after an outage of 3 TTLs the follower published %d times in all, want twice", n)
		}
		cancel()
	})
}
