package leasetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

// Timing of testLostGrantIsReleased: the acquire's reply comes lostDelay
// after the request, past its timeout (the RetryPeriod); the lost grant's
// lease is lostTTL, and the campaign must end far sooner.
const (
	lostRetry = time.Second
	lostDelay = 3 * time.Second
	lostTTL   = 45 * time.Second
	lostBound = 15 * time.Second
)

// delayedHandle opens the handle of testLostGrantIsReleased: through the
// harness's proxy (Harness.Delaying), or, for a store without a network,
// a handle from Open whose next Acquire, once armed, is carried out but
// answered only after its context ended.
func delayedHandle(t *testing.T, h Harness, holder string) (s lease.Store, arm, pass func()) {
	if h.Delaying != nil {
		s, delay, pass := h.Delaying(t)
		t.Cleanup(func() {
			pass()
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s, func() { delay(holder, lostDelay) }, pass
	}
	l := &lateReply{Store: open(t, h)}
	return l, func() { l.armed.Store(true) }, func() {}
}

// lateReply is a Store whose next Acquire, once armed, is carried out
// without the caller's deadline and answered with the deadline's error
// once the caller's context ended: the reply came too late.
type lateReply struct {
	lease.Store
	armed atomic.Bool
}

func (l *lateReply) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if !l.armed.CompareAndSwap(true, false) {
		return l.Store.Acquire(ctx, name, holder, ttl)
	}
	l.Store.Acquire(context.WithoutCancel(ctx), name, holder, ttl)
	<-ctx.Done()
	return lease.Record{}, fmt.Errorf("acquire lease %q: %w", name, ctx.Err())
}

// testLostGrantIsReleased: an acquire the store carried out but whose
// reply came after the call's timeout leaves the name granted to the
// campaigning holder under a token it never learned. The campaign must
// release that grant and acquire the name again, long before the lost
// grant would expire, and the store must refuse the lost grant's token
// afterwards.
func testLostGrantIsReleased(t *testing.T, h Harness) {
	const holder = "lost-grant-holder-4f1c9a"
	s, arm, pass := delayedHandle(t, h, holder)
	var (
		mu        sync.Mutex
		events    []string
		lostToken int64
		passed    bool
	)
	e := &elect.Elector{Store: s, Name: "n", Holder: holder,
		LeaseDuration: lostTTL, RenewDeadline: lostTTL * 2 / 3, RetryPeriod: lostRetry,
		Observe: func(op string, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			var held *lease.HeldError
			switch {
			case err == nil:
				events = append(events, op+" ok")
			case errors.As(err, &held):
				events = append(events, fmt.Sprintf("%s held by %s token %d", op, held.Record.Holder, held.Record.Token))
				if held.Record.Holder == holder && lostToken == 0 {
					lostToken = held.Record.Token
				}
			case errors.Is(err, lease.ErrLost):
				events = append(events, op+" lost")
			default:
				events = append(events, op+" failed")
				if op == "acquire" && !passed {
					passed = true
					pass() // only the first acquire's reply is late
				}
			}
		}}
	arm()
	cctx, cancel := context.WithTimeout(context.Background(), lostBound)
	defer cancel()
	ten, err := e.Campaign(cctx)
	mu.Lock()
	got := strings.Join(events, "; ")
	lost := lostToken
	mu.Unlock()
	if err != nil {
		t.Fatalf("Campaign after a lost acquire reply = %v within %v (the lost grant expires after %v); store calls: %s",
			err, lostBound, lostTTL, got)
	}
	defer ten.Release(ctx(t))
	if lost == 0 {
		t.Fatalf("the campaign never read a grant to itself under another token (the acquire's reply was not lost?); store calls: %s", got)
	}
	if !strings.Contains(got, "release ok") && !strings.Contains(got, "release lost") {
		t.Errorf("the campaign did not release the lost grant; store calls: %s", got)
	}
	if ten.Token() <= lost {
		t.Errorf("tenure token %d, want > the lost grant's %d", ten.Token(), lost)
	}
	t.Logf("store calls: %s", got)
	wantEarlierLost(t, s, ten.Record, lost)
}

// wantEarlierLost checks that a holder's earlier token cannot touch cur,
// its current tenure.
func wantEarlierLost(t *testing.T, s lease.Store, cur lease.Record, earlier int64) {
	t.Helper()
	if _, err := s.Renew(ctx(t), cur.Name, cur.Holder, earlier, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew with the earlier token %d = %v, want ErrLost", earlier, err)
	}
	if err := s.Release(ctx(t), cur.Name, cur.Holder, earlier); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release with the earlier token %d = %v, want ErrLost", earlier, err)
	}
	if err := s.Annotate(ctx(t), cur.Name, cur.Holder, earlier, "earlier"); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Annotate with the earlier token %d = %v, want ErrLost", earlier, err)
	}
	rec, err := s.Get(ctx(t), cur.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !rec.HeldBy(cur.Holder, cur.Token) || rec.Where != "" {
		t.Errorf("record after the earlier token's calls = %+v, want still held by %s with token %d, no Where",
			rec, cur.Holder, cur.Token)
	}
}

// testEarlierTenureIsLost: a holder that released its tenure and acquired
// the name again holds only the new tenure; the earlier token renews,
// releases and annotates nothing.
func testEarlierTenureIsLost(t *testing.T, h Harness) {
	a := open(t, h)
	first := mustAcquire(t, a, "n", "a", ttl)
	mustRelease(t, a, first)
	second := mustAcquire(t, a, "n", "a", ttl)
	if second.Token <= first.Token {
		t.Fatalf("second tenure's token %d, want > %d", second.Token, first.Token)
	}
	wantEarlierLost(t, a, second, first.Token)
}
