package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// fakeProver proves every holder dead once dead is closed, or fails at
// once with err.
type fakeProver struct {
	dead  chan struct{}
	err   error
	calls atomic.Int32
	ended atomic.Int32 // Proves that returned because their context ended
}

func (p *fakeProver) Prove(ctx context.Context, rec lease.Record) (bool, error) {
	p.calls.Add(1)
	if p.err != nil {
		return false, p.err
	}
	select {
	case <-p.dead:
		return false, nil
	case <-ctx.Done():
		p.ended.Add(1)
		return false, ctx.Err()
	}
}

// crashedLeader is a holder "a" that annotated its record and then stopped
// renewing without releasing, as a SIGKILLed leaderrun does. It returns
// the record as the crash left it.
func crashedLeader(t *testing.T, m *leasetest.Memory, clock *fakeClock) lease.Record {
	t.Helper()
	ten := campaign(t, elector(m, "a", clock))
	if err := ten.Annotate(context.Background(), "here"); err != nil {
		t.Fatalf("Annotate: %v", err)
	}
	ten.Abandon()
	rec, err := m.Get(context.Background(), "relay")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestCampaignTakesOverWhenProverProvesHolderDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		dead := crashedLeader(t, m, clock)
		p := &fakeProver{dead: make(chan struct{})}
		e := elector(m, "b", clock)
		e.Prover = p
		got := make(chan *lease.Tenure, 1)
		go func() { got <- campaign(t, e) }()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("b took the name before the prover proved a dead")
		default:
		}
		close(p.dead)
		ten := <-got
		if at := clock.now(); at != time.Second {
			t.Errorf("b took the name at %v, want at once when the proof came (1s), long before the expiry (%v)", at, ttl)
		}
		if ten.Record.Holder != "b" || ten.Token() <= dead.Token {
			t.Errorf("tenure = %+v, want b's with a token > %d", ten.Record, dead.Token)
		}
		if got, want := p.calls.Load(), int32(1); got != want {
			t.Errorf("Prove calls = %d, want %d", got, want)
		}
		ten.Release(context.Background())
	})
}

func TestCampaignWaitsForExpiryWhenUnprovable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		where  bool
		prover *fakeProver
		calls  int32
	}{
		{"prover cannot prove", true, &fakeProver{err: errors.New("another host")}, 1},
		{"record without where", false, &fakeProver{dead: closed()}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &leasetest.Memory{}
				clock := newFakeClock()
				a := campaign(t, elector(m, "a", clock))
				if tc.where {
					a.Annotate(context.Background(), "here")
				}
				a.Abandon()
				e := elector(m, "b", clock)
				e.Prover = tc.prover
				ten := campaign(t, e)
				if at := clock.now(); at < ttl || at > ttl+jitter {
					t.Errorf("b took the name at %v, want at the expiry %v (+ jitter)", at, ttl)
				}
				if got := tc.prover.calls.Load(); got != tc.calls {
					t.Errorf("Prove calls = %d, want %d", got, tc.calls)
				}
				ten.Release(context.Background())
			})
		})
	}
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// restlessStore wakes every Wait after a tenth of a second, changed or not,
// as a store's spurious wake-ups may.
type restlessStore struct{ *leasetest.Memory }

func (s restlessStore) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return s.Memory.Wait(ctx, name, seen, min(timeout, 100*time.Millisecond))
}

func TestOneProvePerTenureAcrossWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		crashedLeader(t, m, clock)
		p := &fakeProver{dead: make(chan struct{})}
		e := elector(restlessStore{m}, "b", clock)
		e.Prover = p
		got := make(chan *lease.Tenure, 1)
		go func() { got <- campaign(t, e) }()
		time.Sleep(2 * time.Second) // some twenty rounds
		close(p.dead)
		ten := <-got
		if got, want := p.calls.Load(), int32(1); got != want {
			t.Errorf("Prove calls = %d, want %d: the watch of one tenure must outlive wake-ups (a dead holder cannot be verified again)", got, want)
		}
		ten.Release(context.Background())
	})
}

func TestWatchEndsWhenTenureChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		a := campaign(t, elector(m, "a", clock))
		a.Annotate(context.Background(), "here")
		p := &fakeProver{dead: make(chan struct{})}
		e := elector(m, "b", clock)
		e.Prover = p
		got := make(chan *lease.Tenure, 1)
		go func() { got <- campaign(t, e) }()
		time.Sleep(time.Second)
		synctest.Wait()
		// a re-annotates (a new child): b watches anew.
		a.Annotate(context.Background(), "there")
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := p.calls.Load(), int32(2); got != want {
			t.Errorf("Prove calls = %d, want %d (one per Where)", got, want)
		}
		if got, want := p.ended.Load(), int32(1); got != want {
			t.Errorf("Proves ended by their context = %d, want %d (the first, when the record changed)", got, want)
		}
		// a hands over normally: b acquires at once, and its watch ends.
		a.Release(context.Background())
		ten := <-got
		if got, want := p.ended.Load(), int32(2); got != want {
			t.Errorf("Proves ended by their context = %d, want %d", got, want)
		}
		ten.Release(context.Background())
	})
}

// refusingStore refuses every Seize, as a step-down reservation for
// another replica would.
type refusingStore struct {
	*leasetest.Memory
	seizes atomic.Int32
}

func (s *refusingStore) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	s.seizes.Add(1)
	return lease.Record{}, &lease.HeldError{Record: dead}
}

func TestRefusedSeizeFallsBackToExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		crashedLeader(t, m, clock)
		s := &refusingStore{Memory: m}
		e := elector(s, "b", clock)
		e.Prover = &fakeProver{dead: closed()}
		ten := campaign(t, e)
		if at := clock.now(); at < ttl || at > ttl+jitter {
			t.Errorf("b took the name at %v, want at the expiry %v (+ jitter)", at, ttl)
		}
		if got, want := s.seizes.Load(), int32(1); got != want {
			t.Errorf("Seize calls = %d, want %d (no retry of a refused takeover)", got, want)
		}
		ten.Release(context.Background())
	})
}
