package elect_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
	s.most, s.candidates = s.inFlight, 0
	return most, candidates
}

func (s *callStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (rec lease.Record, err error) {
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
	s.call(ctx, func() { rec, err = s.Memory.Get(ctx, name) })
	return rec, err
}

func (s *callStore) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) (err error) {
	s.call(ctx, func() { err = s.Memory.Wait(ctx, name, seen, timeout) })
	return err
}

func (s *callStore) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) (err error) {
	s.call(ctx, func() { err = s.Memory.Campaign(ctx, name, holder, c, ttl) })
	return err
}

func (s *callStore) Candidates(ctx context.Context, name string) (list []lease.Standing, err error) {
	s.mu.Lock()
	s.candidates++
	s.mu.Unlock()
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
