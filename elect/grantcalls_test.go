package elect_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// callStore counts the store calls in flight at once, and the candidate
// reads. Every call holds still for a millisecond of the bubble's time, so
// that every other goroutine that would call the store meanwhile has run.
type callStore struct {
	*leasetest.Memory

	mu         sync.Mutex
	inFlight   int
	most       int // the most calls in flight at once
	candidates int // Candidates calls
	gets       int // Get calls
	acquires   int // Acquire calls
	waits      int // Wait calls
}

// call runs fn as one call in flight, made with ctx.
func (s *callStore) call(ctx context.Context, fn func()) {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
	}
	fn()
}

// reset forgets the calls so far, and reports the most in flight at once
// and the candidate reads until now.
func (s *callStore) reset() (most, candidates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	most, candidates = s.most, s.candidates
	s.most, s.candidates, s.gets, s.acquires, s.waits = s.inFlight, 0, 0, 0, 0
	return most, candidates
}

// counts reports the Get and Acquire calls since the last reset.
func (s *callStore) counts() (gets, acquires int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets, s.acquires
}

// waitCount reports the Wait calls since the last reset.
func (s *callStore) waitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waits
}

// count adds one to the counter n.
func (s *callStore) count(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

func (s *callStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (rec lease.Record, err error) {
	s.count(&s.acquires)
	s.call(ctx, func() { rec, err = s.Memory.Acquire(ctx, name, holder, ttl) })
	return rec, err
}

func (s *callStore) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (rec lease.Record, err error) {
	s.call(ctx, func() { rec, err = s.Memory.Seize(ctx, name, holder, dead, ttl) })
	return rec, err
}

func (s *callStore) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (rec lease.Record, err error) {
	s.call(ctx, func() { rec, err = s.Memory.Renew(ctx, name, holder, token, ttl) })
	return rec, err
}

func (s *callStore) Get(ctx context.Context, name string) (rec lease.Record, err error) {
	s.count(&s.gets)
	s.call(ctx, func() { rec, err = s.Memory.Get(ctx, name) })
	return rec, err
}

func (s *callStore) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) (err error) {
	s.count(&s.waits)
	s.call(ctx, func() { err = s.Memory.Wait(ctx, name, seen, timeout) })
	return err
}

func (s *callStore) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) (err error) {
	s.call(ctx, func() { err = s.Memory.Campaign(ctx, name, holder, c, ttl) })
	return err
}

func (s *callStore) Candidates(ctx context.Context, name string) (list []lease.Standing, err error) {
	s.count(&s.candidates)
	s.call(ctx, func() { list, err = s.Memory.Candidates(ctx, name) })
	return list, err
}

// TestGrantMakesOneStoreCallAtATime: from the grant to the tenure that
// Campaign returns, the Elector makes one store call at a time, on a free
// name and at a leader's stopping word alike. A second call in flight
// makes a store with a pool of connections (PostgreSQL's, MySQL's) open
// one more on the hand-off's path: a server process's start, milliseconds.
func TestGrantMakesOneStoreCallAtATime(t *testing.T) {
	t.Run("free name", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &callStore{Memory: &leasetest.Memory{}}
			ten := campaign(t, elector(s, "a", newFakeClock()))
			if most, _ := s.reset(); most != 1 {
				t.Errorf("%d store calls in flight at once until Campaign returned; want 1", most)
			}
			ten.Release(context.Background())
		})
	})
	t.Run("stopping word", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sc := newWordScene(t, nil)
			s := &callStore{Memory: sc.m}
			sc.b.Store = s
			most := make(chan int)
			go func() {
				ten := campaign(t, sc.b)
				n, _ := s.reset()
				most <- n
				ten.Release(context.Background())
			}()
			time.Sleep(time.Second)
			synctest.Wait()
			s.reset() // b stands by, in Wait
			close(sc.p.stopping)
			synctest.Wait()
			close(sc.p.dead)
			if n := <-most; n != 1 {
				t.Errorf("%d store calls in flight at once from the word until Campaign returned; want 1", n)
			}
			sc.a.Abandon()
		})
	})
}

// TestSeizeReadsTheCandidatesWhileTheOldCommandStops: at the leader's
// stopping word the follower reads the candidates (deferGrant's answer)
// before the old command is gone, not after: the read overlaps the old
// command's stop instead of delaying the new one's start.
func TestSeizeReadsTheCandidatesWhileTheOldCommandStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := newWordScene(t, nil)
		s := &callStore{Memory: sc.m}
		sc.b.Store = s
		got := make(chan struct{})
		go func() {
			campaign(t, sc.b).Release(context.Background())
			close(got)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		s.reset()
		close(sc.p.stopping)
		synctest.Wait()
		if _, read := s.reset(); read == 0 {
			t.Error("no candidate read between the stopping word and the proof that the old command is gone")
		}
		close(sc.p.dead)
		<-got
		sc.a.Abandon()
	})
}

// TestTakeoverFindsTheStoreQuiet: while a follower's command starts after
// it took the name at the leader's stopping word, neither the leader (its
// tenure yielded: nothing a step-down request says matters any more) nor
// another follower on the host (beaten to the end signal: the takeover is
// the change it wakes for) calls the store at once: each call competes
// with that start for the host's CPU and the store's (without them,
// etcd's hand-off went from 1.8x etcdctl lock's to 1.3-1.5x,
// bench/findings.md). The follower campaigns again after the pause. Nor
// does the new leader, whose command starts when Campaign returns: it
// watches for step-down requests (a Wait, which reads the record first)
// only StartQuiet later.
func TestTakeoverFindsTheStoreQuiet(t *testing.T) {
	t.Run("new leader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sc := newWordScene(t, nil)
			s := &callStore{Memory: sc.m}
			sc.b.Store = s
			got := make(chan *elect.Tenure, 1)
			go func() { got <- campaign(t, sc.b) }()
			time.Sleep(time.Second)
			synctest.Wait()
			close(sc.p.stopping)
			synctest.Wait()
			close(sc.p.dead)
			ten := <-got
			s.reset()
			time.Sleep(elect.StartQuiet - time.Millisecond)
			synctest.Wait()
			if n := s.waitCount(); n != 0 {
				t.Errorf("the new leader waited on the store %d times within %v of Campaign's return; want none while its command starts", n, elect.StartQuiet)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if s.waitCount() == 0 {
				t.Errorf("the new leader did not watch for step-down requests %v after Campaign's return", elect.StartQuiet)
			}
			ten.Release(context.Background())
			sc.a.Abandon()
		})
	})
	t.Run("yielded leader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &callStore{Memory: &leasetest.Memory{}}
			a := campaign(t, elector(s, "a", newFakeClock()))
			takeOver(t, s, a, "b")
			if gets, _ := s.counts(); gets != 0 {
				t.Errorf("the yielded leader read the record %d times at the takeover; want none", gets)
			}
			a.Abandon()
		})
	})
	t.Run("follower beaten to the end signal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := newFakeClock()
			s := &callStore{Memory: &leasetest.Memory{}}
			a := annotatedLeader(t, s.Memory, clock)
			c := elector(s, "c", clock)
			c.Prover = &fakeProver{err: elect.ErrOtherTakes}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go c.Campaign(ctx)
			takeOver(t, s, a, "b")
			if _, acquires := s.counts(); acquires != 0 {
				t.Errorf("the follower beaten to the end signal campaigned %d times at the takeover; want none", acquires)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if _, acquires := s.counts(); acquires == 0 {
				t.Error("the follower beaten to the end signal did not campaign again after its pause")
			}
			cancel()
			a.Abandon()
		})
	})
}

// takeOver lets every goroutine of the bubble settle in its wait, then
// yields a's tenure and seizes the name "relay" for holder past s's
// counts, which it resets first, and returns once the bubble is still.
func takeOver(t *testing.T, s *callStore, a *elect.Tenure, holder string) {
	t.Helper()
	time.Sleep(time.Second)
	synctest.Wait()
	a.Yield()
	s.reset()
	rec, err := s.Memory.Get(context.Background(), "relay")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Memory.Seize(context.Background(), "relay", holder, rec, ttl); err != nil {
		t.Fatalf("Seize: %v", err)
	}
	synctest.Wait()
}
