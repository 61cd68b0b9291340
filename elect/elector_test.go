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

// The tests run in synctest bubbles: time is fake and advances only when
// every goroutine in the bubble is blocked, so timings are exact.

const (
	ttl      = 15 * time.Second
	deadline = 8 * time.Second
	interval = 2 * time.Second
	tick     = 100 * time.Millisecond // lease.watchTick
	jitter   = 50 * time.Millisecond  // lease.maxJitter
)

// fakeClock follows the bubble's fake time, plus jumps a test adds to
// stand for time the host spent suspended.
type fakeClock struct {
	start time.Time
	jump  atomic.Int64
}

func newFakeClock() *fakeClock { return &fakeClock{start: time.Now()} }

func (c *fakeClock) now() time.Duration {
	return time.Since(c.start) + time.Duration(c.jump.Load())
}

func elector(s lease.Store, holder string, clock *fakeClock) *elect.Elector {
	return &elect.Elector{Store: s, Name: "relay", Holder: holder,
		LeaseDuration: ttl, RenewDeadline: deadline, RetryPeriod: interval, Clock: clock.now}
}

func campaign(t *testing.T, e *elect.Elector) *elect.Tenure {
	t.Helper()
	ten, err := e.Campaign(context.Background())
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	return ten
}

// hangingStore acquires normally; once hang is set, Renew blocks until its
// context ends, as a partitioned connection would.
type hangingStore struct {
	*leasetest.Memory
	hang   atomic.Bool
	renews atomic.Int32
}

func (s *hangingStore) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	s.renews.Add(1)
	if s.hang.Load() {
		<-ctx.Done()
		return lease.Record{}, ctx.Err()
	}
	return s.Memory.Renew(ctx, name, holder, token, ttl)
}

func TestTenureRenewsWhileStoreAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Memory: &leasetest.Memory{}}
		ten := campaign(t, elector(s, "a", newFakeClock()))
		time.Sleep(10*ttl + time.Millisecond)
		if err := context.Cause(ten.Context()); err != nil {
			t.Fatalf("tenure ended with %v while every renew succeeded", err)
		}
		if got, want := s.renews.Load(), int32(10*ttl/interval); got != want {
			t.Errorf("renew attempts in %v = %d, want %d (one every %v)", 10*ttl, got, want, interval)
		}
		if err := ten.Release(context.Background()); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
}

func TestTrustEndsAtRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Memory: &leasetest.Memory{}}
		clock := newFakeClock()
		ten := campaign(t, elector(s, "a", clock))
		// Two renewals succeed (at 2s and 4s), then the store stops
		// answering: trust ends 8s after the last successful send.
		time.Sleep(2*interval + time.Millisecond)
		s.hang.Store(true)
		lastSent := 2 * interval
		<-ten.Context().Done()
		ended := clock.now()
		if got, want := context.Cause(ten.Context()), elect.ErrDeadline; !errors.Is(got, want) {
			t.Errorf("cause = %v, want %v", got, want)
		}
		if ended < lastSent+deadline {
			t.Errorf("trust ended at %v, before the deadline %v", ended, lastSent+deadline)
		}
		if ended > lastSent+deadline+tick {
			t.Errorf("trust ended at %v, more than one tick after the deadline %v", ended, lastSent+deadline)
		}
		ten.Release(context.Background())
	})
}

func TestSlowSuccessfulRenewCountsFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{Memory: &leasetest.Memory{}, delay: 1500 * time.Millisecond}
		clock := newFakeClock()
		ten := campaign(t, elector(s, "a", clock))
		// Every renew takes 1.5s to answer; trust is anchored on sends, so
		// the tenure survives, and never trusts past send+deadline.
		time.Sleep(5 * ttl)
		if err := context.Cause(ten.Context()); err != nil {
			t.Fatalf("tenure ended with %v", err)
		}
		s.hang.Store(true)
		start := clock.now()
		<-ten.Context().Done()
		// The last renew whose reply arrived was sent at most one
		// interval before the hang began.
		if got := clock.now() - start; got > deadline+tick {
			t.Errorf("trust lasted %v after the last reply, want at most %v", got, deadline+tick)
		}
		ten.Release(context.Background())
	})
}

// slowAcquireStore answers Acquire only after delay, as a slow network or a
// busy database would.
type slowAcquireStore struct {
	*hangingStore
	delay time.Duration
}

func (s *slowAcquireStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	rec, err := s.hangingStore.Acquire(ctx, name, holder, ttl)
	time.Sleep(s.delay)
	return rec, err
}

// TestFirstTrustCountsFromAcquireSendTime: the tenure's first deadline is
// the acquire's send time + RenewDeadline, not its reply's: a slow reply
// must not stretch trust past the store's expiry.
func TestFirstTrustCountsFromAcquireSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowAcquireStore{hangingStore: &hangingStore{Memory: &leasetest.Memory{}}, delay: 1500 * time.Millisecond}
		s.hang.Store(true) // no renewal ever succeeds
		clock := newFakeClock()
		e := elector(s, "a", clock)
		e.RetryPeriod = 2 * time.Second // the acquire's timeout outlasts its delay
		ten := campaign(t, e)
		<-ten.Context().Done()
		if got, limit := clock.now(), deadline+tick; got > limit {
			t.Errorf("trust ended at %v, want by %v: the deadline counts from the acquire's send time (0), not its reply (%v)",
				got, limit, s.delay)
		}
		ten.Release(context.Background())
	})
}

type slowStore struct {
	*leasetest.Memory
	delay time.Duration
	hang  atomic.Bool
}

func (s *slowStore) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	if s.hang.Load() {
		<-ctx.Done()
		return lease.Record{}, ctx.Err()
	}
	rec, err := s.Memory.Renew(ctx, name, holder, token, ttl)
	select {
	case <-time.After(s.delay):
		return rec, err
	case <-ctx.Done():
		return lease.Record{}, ctx.Err()
	}
}

func TestLostEndsTenureAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		ten := campaign(t, elector(m, "a", clock))
		time.Sleep(interval + interval/2)
		m.Delete("relay") // the next renew (at 4s) is told "lost"
		<-ten.Context().Done()
		if got, want := context.Cause(ten.Context()), lease.ErrLost; !errors.Is(got, want) {
			t.Errorf("cause = %v, want %v", got, want)
		}
		if got, want := clock.now(), 2*interval; got != want {
			t.Errorf("tenure ended at %v, want %v (the first renew after the loss)", got, want)
		}
		if err := ten.Release(context.Background()); !errors.Is(err, lease.ErrLost) {
			t.Errorf("Release after loss = %v, want ErrLost", err)
		}
	})
}

func TestSuspendEndsTrustBeforeAnyStoreCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &hangingStore{Memory: &leasetest.Memory{}}
		clock := newFakeClock()
		ten := campaign(t, elector(s, "a", clock))
		time.Sleep(interval / 2)
		before := s.renews.Load()
		// The host sleeps for an hour: the boot clock jumps, Go's timers
		// do not notice.
		clock.jump.Store(int64(time.Hour))
		<-ten.Context().Done()
		if got, want := context.Cause(ten.Context()), elect.ErrDeadline; !errors.Is(got, want) {
			t.Errorf("cause = %v, want %v", got, want)
		}
		if got := clock.now() - time.Hour - interval/2; got > tick {
			t.Errorf("suspend noticed %v after wake-up, want within %v", got, tick)
		}
		if got := s.renews.Load(); got != before {
			t.Errorf("%d renew(s) sent after waking past the deadline, want none", got-before)
		}
		ten.Release(context.Background())
	})
}

func TestFollowerWakesAtExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		// A leader that acquired and then died without renewing.
		if _, err := m.Acquire(context.Background(), "relay", "dead", ttl); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		s := &countingStore{Memory: m}
		ten := campaign(t, elector(s, "b", clock))
		at := clock.now()
		if at < ttl || at > ttl+50*time.Millisecond {
			t.Errorf("follower acquired at %v, want within 50ms jitter after the expiry %v", at, ttl)
		}
		if got, want := s.acquires.Load(), int32(2); got != want {
			t.Errorf("acquire attempts = %d, want %d (one refused, one at expiry)", got, want)
		}
		ten.Release(context.Background())
	})
}

func TestReleaseWakesFollowerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		leader := campaign(t, elector(m, "a", clock))
		got := make(chan *elect.Tenure)
		go func() { got <- campaign(t, elector(m, "b", clock)) }()
		time.Sleep(5 * time.Second)
		synctest.Wait() // the follower sleeps in Wait
		released := clock.now()
		if err := leader.Release(context.Background()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		follower := <-got
		if lag := clock.now() - released; lag != 0 {
			t.Errorf("follower acquired %v after the release, want at once", lag)
		}
		if follower.Token() <= leader.Token() {
			t.Errorf("follower token %d, want > %d", follower.Token(), leader.Token())
		}
		follower.Release(context.Background())
	})
}

func TestCampaignRetriesStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		m.SetFailure(errors.New("connection refused"))
		got := make(chan *elect.Tenure)
		go func() { got <- campaign(t, elector(m, "a", newFakeClock())) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("acquired while the store failed")
		default:
		}
		m.SetFailure(nil)
		ten := <-got
		ten.Release(context.Background())
	})
}

func TestCampaignStopsOnRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		m.SetFailure(lease.ErrRefused)
		_, err := elector(m, "a", newFakeClock()).Campaign(context.Background())
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Campaign = %v, want ErrRefused", err)
		}
	})
}

func TestCampaignEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		if _, err := m.Acquire(context.Background(), "relay", "other", time.Hour); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := elector(m, "a", newFakeClock()).Campaign(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Campaign = %v, want DeadlineExceeded", err)
		}
	})
}

type countingStore struct {
	*leasetest.Memory
	acquires atomic.Int32
}

func (s *countingStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	s.acquires.Add(1)
	return s.Memory.Acquire(ctx, name, holder, ttl)
}

func TestStepDownEndsTenureAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		ten := campaign(t, elector(m, "a", clock))
		time.Sleep(interval / 2)
		if _, err := m.RequestStepDown(context.Background(), "relay", "", time.Minute); err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		select {
		case <-ten.Context().Done():
		case <-time.After(ttl):
			t.Fatal("tenure still on a TTL after the step-down request")
		}
		if got, want := context.Cause(ten.Context()), elect.ErrSteppedDown; !errors.Is(got, want) {
			t.Errorf("cause = %v, want %v", got, want)
		}
		if got, want := clock.now(), interval/2; got != want {
			t.Errorf("tenure ended at %v, want %v (when the store's wake-up told of the request, before the next renew)", got, want)
		}
		// The name is still the tenure's to hand back.
		if err := ten.Release(context.Background()); err != nil {
			t.Errorf("Release after a step-down = %v, want nil", err)
		}
	})
}

// deafStore never wakes a Wait before its timeout: a store whose wake-up
// channel lost the notification.
type deafStore struct{ *leasetest.Memory }

func (s deafStore) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	select {
	case <-time.After(timeout):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestStepDownWithoutWakeUpEndsTenureAtNextRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		ten := campaign(t, elector(deafStore{m}, "a", clock))
		time.Sleep(interval / 2)
		if _, err := m.RequestStepDown(context.Background(), "relay", "", time.Minute); err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		<-ten.Context().Done()
		if got, want := context.Cause(ten.Context()), elect.ErrSteppedDown; !errors.Is(got, want) {
			t.Errorf("cause = %v, want %v", got, want)
		}
		if got, want := clock.now(), interval; got != want {
			t.Errorf("tenure ended at %v, want %v (the first renew after the request)", got, want)
		}
		ten.Release(context.Background())
	})
}

func TestSteppedDownHolderWaitsOutTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		e := elector(m, "a", clock)
		ten := campaign(t, e)
		const window = 30 * time.Second
		if _, err := m.RequestStepDown(context.Background(), "relay", "", window); err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		<-ten.Context().Done()
		if err := ten.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Nobody else campaigns: a takes the name back once the window
		// has passed, having slept rather than spun.
		s := &countingStore{Memory: m}
		e.Store = s
		again := campaign(t, e)
		if at := clock.now(); at < window || at > window+jitter {
			t.Errorf("re-acquired at %v, want within %v after the window's end %v", at, jitter, window)
		}
		if got, want := s.acquires.Load(), int32(2); got != want {
			t.Errorf("acquire attempts = %d, want %d (one refused, one at the window's end)", got, want)
		}
		if again.Token() <= ten.Token() {
			t.Errorf("token %d, want > %d", again.Token(), ten.Token())
		}
		again.Release(context.Background())
	})
}

func TestStepDownHandsOverToSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		leader := campaign(t, elector(m, "a", clock))
		got := make(chan *elect.Tenure, 2)
		for _, id := range []string{"b", "c"} {
			go func() { got <- campaign(t, elector(m, id, clock)) }()
		}
		time.Sleep(time.Second)
		synctest.Wait() // b and c stand by, known as candidates
		if _, err := m.RequestStepDown(context.Background(), "relay", "c", time.Minute); err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		<-leader.Context().Done()
		released := clock.now()
		if err := leader.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if got := next.Record.Holder; got != "c" {
			t.Errorf("next holder = %q, want the successor c", got)
		}
		if lag := clock.now() - released; lag != 0 {
			t.Errorf("successor acquired %v after the release, want at once", lag)
		}
		next.Release(context.Background())
		(<-got).Release(context.Background())
	})
}

// failingReleaseStore's Release fails as a store's does: its error names
// the operation and the lease already.
type failingReleaseStore struct{ *leasetest.Memory }

func (s failingReleaseStore) Release(ctx context.Context, name, holder string, token int64) error {
	return fmt.Errorf("release lease %q: connection reset", name)
}

// TestReleaseErrorNamedOnce: Tenure.Release does not repeat the context
// the store's error has ("release lease "x": release lease "x": …", issue
// 37.15); ErrLost, which carries none, gets it.
func TestReleaseErrorNamedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ten := campaign(t, elector(failingReleaseStore{&leasetest.Memory{}}, "a", newFakeClock()))
		err := ten.Release(context.Background())
		if got, want := fmt.Sprint(err), `release lease "relay": connection reset`; got != want {
			t.Errorf("Release = %q, want %q", got, want)
		}
	})
}

// A follower says "standing by" once per tenure it waits for: the leader
// recording where its command runs (Annotate, just after the command
// starts) changes the record, not what the follower has to say. It said it
// twice, 25 ms apart, before.
func TestStandingBySaidOncePerTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		leader := campaign(t, elector(m, "a", clock))
		logged := followerLog(elector(m, "b", clock), func() {
			if err := leader.Annotate(context.Background(), "somewhere"); err != nil {
				t.Fatal(err)
			}
		})
		if n := strings.Count(logged, "standing by"); n != 1 {
			t.Errorf("the follower said standing by %d times, want once:\n%s", n, logged)
		}
		leader.Release(context.Background())
	})
}

// Two replicas started with the same --identity: the second stands by, as
// the store does not grant it the first one's tenure, and says why that is
// a mistake. It said "lease held by another; standing by" with leader= its
// own identity before.
func TestSharedIdentityIsWarnedOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &leasetest.Memory{}
		clock := newFakeClock()
		first := campaign(t, elector(m, "web-1", clock))
		logged := followerLog(elector(m, "web-1", clock), nil)
		if !strings.Contains(logged, `level=WARN msg="the lease is held under this replica's own identity, by an earlier run of it that did not release (it crashed?) or by another replica started with the same identity`) {
			t.Errorf("the second replica with identity web-1 did not warn of it:\n%s", logged)
		}
		first.Release(context.Background())
	})
}

// followerLog runs e's Campaign in the bubble while another holds the name,
// logging at info: until every goroutine waits, then, with act, after act
// and a second; it returns what e logged.
func followerLog(e *elect.Elector, act func()) string {
	var logged bytes.Buffer
	e.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Campaign(ctx) }()
	synctest.Wait()
	if act != nil {
		act()
		time.Sleep(time.Second)
		synctest.Wait()
	}
	cancel()
	<-done
	return logged.String()
}
