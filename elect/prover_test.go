package elect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// fakeProver proves every holder dead once dead is closed, or fails at
// once with err. With stopping, it first calls ending once stopping is
// closed, and then fails with deadErr, if set, once dead is closed.
type fakeProver struct {
	dead     chan struct{}
	err      error
	stopping chan struct{}
	deadErr  error
	calls    atomic.Int32
	ended    atomic.Int32 // Proves that returned because their context ended
}

func (p *fakeProver) Prove(ctx context.Context, rec lease.Record, ending func()) (bool, error) {
	p.calls.Add(1)
	if p.err != nil {
		return false, p.err
	}
	if p.stopping != nil {
		select {
		case <-p.stopping:
			ending()
		case <-ctx.Done():
			p.ended.Add(1)
			return false, ctx.Err()
		}
	}
	select {
	case <-p.dead:
		return false, p.deadErr
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
	annotatedLeader(t, m, clock).Abandon()
	rec, err := m.Get(context.Background(), "relay")
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// annotatedLeader is a holder "a" that annotated its record: it renews
// until its test ends it.
func annotatedLeader(t *testing.T, m *leasetest.Memory, clock *fakeClock) *elect.Tenure {
	t.Helper()
	ten := campaign(t, elector(m, "a", clock))
	if err := ten.Annotate(context.Background(), "here"); err != nil {
		t.Fatalf("Annotate: %v", err)
	}
	return ten
}

func TestCampaignTakesOverWhenProverProvesHolderDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		dead := crashedLeader(t, m, clock)
		p := &fakeProver{dead: make(chan struct{})}
		e := elector(m, "b", clock)
		e.Prover = p
		got := make(chan *elect.Tenure, 1)
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
		got := make(chan *elect.Tenure, 1)
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
		got := make(chan *elect.Tenure, 1)
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

// wordScene is a holder "a" that annotated its record and a follower "b"
// whose Prover tells it that a is stopping once p.stopping is closed, and
// returns once p.dead is closed (with p.deadErr). Call it in a bubble.
type wordScene struct {
	m     *leasetest.Memory
	clock *fakeClock
	a     *elect.Tenure
	p     *fakeProver
	b     *elect.Elector
}

func newWordScene(t *testing.T, deadErr error) *wordScene {
	t.Helper()
	sc := &wordScene{m: &leasetest.Memory{}, clock: newFakeClock()}
	sc.a = annotatedLeader(t, sc.m, sc.clock)
	sc.p = &fakeProver{stopping: make(chan struct{}), dead: make(chan struct{}), deadErr: deadErr}
	sc.b = elector(sc.m, "b", sc.clock)
	sc.b.Prover = sc.p
	return sc
}

// TestCampaignSeizesAtEndingWordAndWaitsForProof: at the holder's word
// that it is ending its tenure, b takes the name at once (the store shows
// it), but Campaign returns the tenure only once the proof is complete.
func TestCampaignSeizesAtEndingWordAndWaitsForProof(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newWordScene(t, nil)
		m, clock, a, p, e := sc.m, sc.clock, sc.a, sc.p, sc.b
		got := make(chan *elect.Tenure, 1)
		go func() { got <- campaign(t, e) }()
		time.Sleep(time.Second)
		close(p.stopping)
		synctest.Wait()
		rec, err := m.Get(context.Background(), "relay")
		if err != nil || rec.Holder != "b" || rec.Token <= a.Token() {
			t.Fatalf("record after the word = %+v, %v; want b's, seized at once", rec, err)
		}
		time.Sleep(3 * time.Second) // b's tenure renews meanwhile
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Campaign returned before the proof that the old command is gone")
		default:
		}
		close(p.dead)
		ten := <-got
		if at := clock.now(); at != 4*time.Second {
			t.Errorf("Campaign returned at %v, want when the proof came (4s)", at)
		}
		if ten.Token() != rec.Token || !ten.Seized() || ten.Context().Err() != nil {
			t.Errorf("tenure token %d, seized %v, ended %v; want the live seized tenure %d", ten.Token(), ten.Seized(), ten.Context().Err(), rec.Token)
		}
		ten.Release(context.Background())
		a.Abandon()
	})
}

// TestCampaignAfterEndingWordWithoutProofWaitsLeaseDuration: when the
// proof does not come after the word (a holder frozen mid-stop, or a
// dead one whose tree cannot be seen), b starts no sooner than a lease
// duration after its seize, when the old lease would have expired, and
// its tenure does not claim a proof (Seized).
func TestCampaignAfterEndingWordWithoutProofWaitsLeaseDuration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      time.Duration // when the proof ends after the word, if it does (<0: at once)
		deadErr error
	}{
		{"frozen holder", 0, nil},
		{"unprovable tree", 2 * time.Second, errors.New("cannot see the group")},
		{"unprovable tree before the seize returned", -1, errors.New("cannot see the group")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := newWordScene(t, tc.deadErr)
				clock, a, p, e := sc.clock, sc.a, sc.p, sc.b
				if tc.at < 0 {
					close(p.dead)
				}
				got := make(chan *elect.Tenure, 1)
				go func() { got <- campaign(t, e) }()
				time.Sleep(time.Second)
				close(p.stopping)
				if tc.at > 0 {
					time.Sleep(tc.at)
					close(p.dead)
				}
				ten := <-got
				if at, want := clock.now(), time.Second+ttl; at != want {
					t.Errorf("Campaign returned at %v, want a lease duration after the seize (%v)", at, want)
				}
				if ten.Seized() || ten.Context().Err() != nil {
					t.Errorf("tenure seized %v, ended %v; want a live tenure that claims no proof", ten.Seized(), ten.Context().Err())
				}
				ten.Release(context.Background())
				a.Abandon()
			})
		})
	}
}

// TestCampaignEndedWhileSettlingKeepsName: a campaign that ends after its
// seize at the word but before the proof leaves the name taken (not
// released: the old command may still run) until the seized lease
// expires.
func TestCampaignEndedWhileSettlingKeepsName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newWordScene(t, nil)
		m, clock, a, p, e := sc.m, sc.clock, sc.a, sc.p, sc.b
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := e.Campaign(ctx)
			done <- err
		}()
		time.Sleep(time.Second)
		close(p.stopping)
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Campaign = %v, want context.Canceled", err)
		}
		rec, err := m.Get(context.Background(), "relay")
		if err != nil || rec.Holder != "b" || rec.Released {
			t.Fatalf("record = %+v, %v; want b's, not released", rec, err)
		}
		c := elector(m, "c", clock)
		c.Prover = &fakeProver{dead: make(chan struct{})}
		ten := campaign(t, c)
		if at := clock.now(); at < time.Second+ttl {
			t.Errorf("c took the name at %v, before b's seized lease expired (%v)", at, time.Second+ttl)
		}
		ten.Release(context.Background())
		a.Abandon()
	})
}

// TestYieldedTenureTakenIsNoLoss: a holder that told a follower it may
// take the name (Yield) and then finds it taken at its next renewal ends
// its tenure with ErrAbandoned, not ErrLost (which an operator's alert on
// lost tenures would count); one that did not yield lost it.
func TestYieldedTenureTakenIsNoLoss(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yield bool
		want  error
	}{
		{"yielded", true, elect.ErrAbandoned},
		{"not yielded", false, lease.ErrLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := &leasetest.Memory{}
				clock := newFakeClock()
				a := annotatedLeader(t, m, clock)
				if tc.yield {
					a.Yield()
				}
				rec, err := m.Get(context.Background(), "relay")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.Seize(context.Background(), "relay", "b", rec, ttl); err != nil {
					t.Fatalf("Seize: %v", err)
				}
				time.Sleep(interval + time.Millisecond)
				synctest.Wait()
				if got := context.Cause(a.Context()); got != tc.want {
					t.Errorf("a's tenure ended with %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// A watch that cannot prove anything because the leader's command has just
// exited (its tenure ending, or the command restarting) is no news for the
// operator: the line is at debug level, where a Prove that fails for a
// reason worth knowing stays at info. It read "cannot watch the leader on
// this host … pidfd_open: no such process" at info before.
func TestCommandGoneIsNotWorthAnInfoLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		info bool
	}{
		{fmt.Errorf("cannot prove: %w: pidfd_open(123): no such process", elect.ErrCommandGone), false},
		{fmt.Errorf("cannot prove: %w", elect.ErrElsewhere), false},
		{errors.New("cannot prove: no permission to signal the leader's command"), true},
	} {
		synctest.Test(t, func(t *testing.T) {
			m := &leasetest.Memory{}
			clock := newFakeClock()
			leader := annotatedLeader(t, m, clock)
			e := elector(m, "b", clock)
			e.Prover = &fakeProver{err: tc.err}
			logged := followerLog(e, nil)
			if got := strings.Contains(logged, "cannot watch the leader"); got != tc.info {
				t.Errorf("Prove error %q: logged at info %v, want %v:\n%s", tc.err, got, tc.info, logged)
			}
			leader.Release(context.Background())
		})
	}
}

// A takeover at the leader's word that it is stopping is said once: the
// follower said "took over the lease" a second time once the proof came.
func TestTakeoverAtStoppingWordSaidOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newWordScene(t, nil)
		var logged bytes.Buffer
		sc.b.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		got := make(chan *elect.Tenure, 1)
		go func() { got <- campaign(t, sc.b) }()
		time.Sleep(time.Second)
		close(sc.p.stopping)
		synctest.Wait()
		close(sc.p.dead)
		ten := <-got
		if n := strings.Count(logged.String(), "took over the lease"); n != 1 {
			t.Errorf("the takeover was said %d times, want once:\n%s", n, logged.String())
		}
		ten.Release(context.Background())
		sc.a.Abandon()
	})
}

// A leader on this host in another PID namespace (a container sharing the
// store's volume) cannot be watched, so its crash hands over only at the
// lease's expiry: that is said at info level once, not for every tenure
// watched after it. At the default level it was not said at all.
func TestOtherNamespaceSaidOnceAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		leader := annotatedLeader(t, m, clock)
		e := elector(m, "b", clock)
		e.Prover = &fakeProver{err: fmt.Errorf("cannot prove: %w (PID namespace 4026531836)", elect.ErrOtherNamespace)}
		logged := followerLog(e, func() {
			// The same leader records another place: a watch of its own.
			if err := leader.Annotate(context.Background(), "there"); err != nil {
				t.Fatalf("Annotate: %v", err)
			}
		})
		if got := strings.Count(logged, "in another PID namespace"); got != 1 {
			t.Errorf("said %d times that the leader is in another PID namespace, want once at info:\n%s", got, logged)
		}
		if !strings.Contains(logged, "lease_duration=") {
			t.Errorf("the line does not say how long a crash takes to hand over:\n%s", logged)
		}
		leader.Release(context.Background())
	})
}
