package elect_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// The owner loop's tests run in synctest bubbles against the in-memory
// store; each owner's "work" is a goroutine that, when its tenure ends,
// waits the member's stop delay and releases, as leaderrun stops a child.

// works records which member runs each partition's work, and fails the
// test if two ever overlap.
type works struct {
	t       *testing.T
	mu      sync.Mutex // guards running
	running map[int]string
}

func (w *works) start(p int, member string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if other, ok := w.running[p]; ok {
		w.t.Errorf("partition %d: %s started while %s still runs it", p, member, other)
	}
	w.running[p] = member
}

func (w *works) stop(p int, member string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[p] == member {
		delete(w.running, p)
	}
}

func (w *works) owners(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, n)
	for p := range n {
		out[p] = w.running[p]
	}
	return out
}

// member is a running Owner.
type member struct {
	o      *elect.Owner
	store  *failing
	cancel context.CancelFunc
	done   chan error
	// stopDelay is how long its work takes to stop once its tenure ended.
	stopDelay atomic.Int64
	causes    sync.Map // partition → the cause its last tenure ended with
	// where, when set, is annotated on every tenure, as leaderrun records
	// where a partition's command runs; prover is the Owner's Prover.
	where  string
	prover elect.Prover
}

// failing is a handle that, once broken, fails every call, as a store
// this member cannot reach.
type failing struct {
	*leasetest.Memory
	broken atomic.Bool
	stall  atomic.Pointer[stall]
}

// stall holds back one RenewMember until release is closed, as a slow
// network does: its answer, once the store gave it, or (before) the
// request, before the store sees it. reached is closed when it is held.
type stall struct {
	before           bool
	reached, release chan struct{}
}

func newStall(before bool) *stall {
	return &stall{before: before, reached: make(chan struct{}), release: make(chan struct{})}
}

func (s *stall) hold(when bool) {
	if s != nil && s.before == when {
		close(s.reached)
		<-s.release
	}
}

func (f *failing) RenewMember(ctx context.Context, group, m string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	if f.broken.Load() {
		<-ctx.Done()
		return lease.Group{}, ctx.Err()
	}
	s := f.stall.Swap(nil)
	if s != nil {
		// Sent, it reaches the store even if the caller gives up.
		ctx = context.WithoutCancel(ctx)
	}
	s.hold(true)
	g, err := f.Memory.RenewMember(ctx, group, m, claims, ttl)
	s.hold(false)
	return g, err
}

func (f *failing) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	if f.broken.Load() {
		<-ctx.Done()
		return lease.Record{}, ctx.Err()
	}
	return f.Memory.Acquire(ctx, name, holder, ttl)
}

const (
	ownerN     = 16
	ownerTTL   = 15 * time.Second
	ownerG     = 8 * time.Second
	ownerR     = 2 * time.Second
	reconcileI = 10 * time.Second
)

func startMember(t *testing.T, m *leasetest.Memory, w *works, id string, opts ...func(*member)) *member {
	mb := &member{store: &failing{Memory: m.Handle()}, done: make(chan error, 1)}
	for _, opt := range opts {
		opt(mb)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mb.cancel = cancel
	start := time.Now()
	mb.o = &elect.Owner{Store: mb.store, Group: "ingest", Partitions: ownerN, Member: id,
		LeaseDuration: ownerTTL, RenewDeadline: ownerG, RetryPeriod: ownerR, ReconcileInterval: reconcileI,
		Clock: func() time.Duration { return time.Since(start) }, Prover: mb.prover,
		Started: func(p int, ten *elect.Tenure) {
			w.start(p, id)
			if mb.where != "" {
				go ten.Annotate(ten.Context(), mb.where)
			}
			go func() {
				<-ten.Context().Done()
				mb.causes.Store(p, context.Cause(ten.Context()))
				time.Sleep(time.Duration(mb.stopDelay.Load()))
				w.stop(p, id)
				ten.Release(context.Background())
			}()
		}}
	go func() { mb.done <- mb.o.Run(ctx) }()
	return mb
}

// leave stops the member gracefully and waits for Run to return.
func (mb *member) leave(t *testing.T) {
	t.Helper()
	mb.cancel()
	select {
	case err := <-mb.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Hour):
		t.Fatal("Run did not return after its context ended")
	}
}

func wantBounded(t *testing.T, owners []string, ids ...string) {
	t.Helper()
	want := elect.Target("ingest", ownerN, ids)
	if !slices.Equal(owners, want) {
		t.Errorf("partitions run by %q, want the target %q", owners, want)
	}
}

func TestOwnersConvergeToTheBoundedTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, a, b, c := settledThree(t)
		wantBounded(t, w.owners(ownerN), "a", "b", "c")
		for _, mb := range []*member{a, b, c} {
			if n := len(mb.o.Held()); n > (ownerN+2)/3 {
				t.Errorf("%s holds %d partitions, more than ⌈16/3⌉", mb.o.Member, n)
			}
		}
		a.leave(t)
		b.leave(t)
		c.leave(t)
	})
}

// settledThree starts members a, b and c of one group and lets them
// settle on the target for a minute.
func settledThree(t *testing.T) (w *works, a, b, c *member) {
	m := &leasetest.Memory{}
	w = &works{t: t, running: map[int]string{}}
	a, b, c = startMember(t, m, w, "a"), startMember(t, m, w, "b"), startMember(t, m, w, "c")
	time.Sleep(time.Minute)
	return w, a, b, c
}

// TestRoundAnsweredBeforeALeaveDoesNotUndoIt holds back the answer to a
// renewal round that the store gave before a member left, until the
// owner has seen the leave; that answer must not bring the member back
// into the owner's view (the owner would hand off what it had just taken,
// or wait for the next round to take it).
func TestRoundAnsweredBeforeALeaveDoesNotUndoIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, a, b, c := settledThree(t)
		a.causes.Clear()
		s := newStall(false)
		a.store.stall.Store(s)
		<-s.reached
		c.leave(t)
		synctest.Wait()
		close(s.release)
		time.Sleep(time.Second)
		wantBounded(t, w.owners(ownerN), "a", "b")
		a.causes.Range(func(p, cause any) bool {
			t.Errorf("a's tenure of partition %d ended: %v", p, cause)
			return true
		})
		a.leave(t)
		b.leave(t)
	})
}

// TestRoundInFlightDoesNotUndoALeave delays a renewal round of a member
// that leaves until after its leave began: the round must not make it a
// member again (the others would keep its partitions for it, unowned,
// until its record expired).
func TestRoundInFlightDoesNotUndoALeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, a, b, c := settledThree(t)
		s := newStall(true)
		c.store.stall.Store(s)
		<-s.reached
		c.cancel()
		synctest.Wait()
		close(s.release)
		time.Sleep(time.Second)
		wantBounded(t, w.owners(ownerN), "a", "b")
		c.leave(t)
		a.leave(t)
		b.leave(t)
	})
}

func TestLeavingMemberIsReplacedWithinOneReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, a, b, c := settledThree(t)
		left := time.Now()
		c.leave(t)
		// The others are woken by the leave and the releases: at once.
		time.Sleep(time.Second)
		wantBounded(t, w.owners(ownerN), "a", "b")
		if took := time.Since(left); took > reconcileI {
			t.Errorf("took %v", took)
		}
		a.leave(t)
		b.leave(t)
	})
}

func TestSilentMemberLosesItsPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, w := &leasetest.Memory{}, &works{t: t, running: map[int]string{}}
		a := startMember(t, m, w, "a")
		b := startMember(t, m, w, "b")
		time.Sleep(time.Minute)
		mine := a.o.Held()
		cut := time.Now()
		a.store.broken.Store(true) // a can no longer reach the store
		// a's work stops by its renew deadline (counted from the last
		// round sent before the cut); b takes over once the leases expire.
		time.Sleep(ownerG + 50*time.Millisecond)
		for _, p := range mine {
			if owner := w.owners(ownerN)[p]; owner == "a" {
				t.Errorf("partition %d still run by a %v after it lost the store (renew deadline %v)", p, time.Since(cut), ownerG)
			}
			if c, _ := a.causes.Load(p); !errors.Is(c.(error), elect.ErrDeadline) {
				t.Errorf("partition %d ended with %v, want the renew deadline", p, c)
			}
		}
		time.Sleep(ownerTTL - ownerG + ownerR + time.Second)
		wantBounded(t, w.owners(ownerN), "b")
		a.store.broken.Store(false)
		a.leave(t)
		b.leave(t)
	})
}

// A member that dies on this host (its Prover proves it dead and each
// partition's work gone) loses its partitions at once, not at the leases'
// expiry; none is taken while it lives (works fails the test on an
// overlap), though the survivor watches them all along.
func TestDeadMemberOnThisHostLosesItsPartitionsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, w := &leasetest.Memory{}, &works{t: t, running: map[int]string{}}
		prover := &fakeProver{dead: make(chan struct{})}
		a := startMember(t, m, w, "a", func(mb *member) { mb.where = "here" })
		b := startMember(t, m, w, "b", func(mb *member) { mb.prover = prover })
		time.Sleep(time.Minute)
		wantBounded(t, w.owners(ownerN), "a", "b")
		if prover.calls.Load() == 0 {
			t.Fatal("b watches none of a's partitions")
		}
		// SIGKILL: a stops, the proof kills its work. A round of a's is
		// due at this very minute: it lands first, as a dead member's
		// calls do, or, landing after b removed a from the group, it would
		// make a a member again.
		synctest.Wait()
		mine := a.o.Held()
		a.store.broken.Store(true)
		for _, p := range mine {
			w.stop(p, "a")
		}
		close(prover.dead)
		time.Sleep(time.Second) // far less than the leases' TTL
		wantBounded(t, w.owners(ownerN), "b")
		g, err := m.GetGroup(context.Background(), "ingest")
		if err != nil || slices.Contains(g.Identities(), "a") {
			t.Errorf("group = %+v, %v; want a removed", g, err)
		}
		a.store.broken.Store(false)
		a.leave(t)
		b.leave(t)
	})
}

func TestSlowHandOffKeepsTheLeaseUntilReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, w := &leasetest.Memory{}, &works{t: t, running: map[int]string{}}
		a := startMember(t, m, w, "a")
		time.Sleep(time.Minute)
		a.stopDelay.Store(int64(40 * time.Second)) // longer than the TTL
		b := startMember(t, m, w, "b")
		time.Sleep(30 * time.Second)
		// a's work on the partitions moving to b is still stopping: their
		// leases must still be a's, renewed, and b must not run them.
		target := elect.Target("ingest", ownerN, []string{"a", "b"})
		g, err := m.GetGroup(context.Background(), "ingest")
		if err != nil {
			t.Fatal(err)
		}
		for p, owner := range target {
			if owner == "b" && !(g.Leases[p].Holder == "a" && g.Leases[p].Held()) {
				t.Errorf("partition %d during a's slow hand-off: %+v, want still held by a", p, g.Leases[p])
			}
		}
		time.Sleep(20 * time.Second)
		wantBounded(t, w.owners(ownerN), "a", "b")
		a.stopDelay.Store(0)
		a.leave(t)
		b.leave(t)
	})
}

// TestMembersWhoDisagreeNeverShareAPartition: a member that sees the group
// late (it misses wake-ups) computes another target for a while; the
// leases arbitrate, and works.start fails the test on any overlap.
func TestMembersWhoDisagreeNeverShareAPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, w := &leasetest.Memory{}, &works{t: t, running: map[int]string{}}
		var ms []*member
		for i := range 4 {
			ms = append(ms, startMember(t, m, w, fmt.Sprintf("m%d", i)))
			time.Sleep(time.Duration(i) * 700 * time.Millisecond)
		}
		ms[1].leave(t)
		ms = append(ms[:1], ms[2:]...)
		ms = append(ms, startMember(t, m, w, "m4"))
		time.Sleep(time.Minute)
		var ids []string
		for _, mb := range ms {
			ids = append(ids, mb.o.Member)
		}
		wantBounded(t, w.owners(ownerN), ids...)
		for _, mb := range ms {
			mb.leave(t)
		}
	})
}

func TestWrongPartitionCountIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, w := &leasetest.Memory{}, &works{t: t, running: map[int]string{}}
		a := startMember(t, m, w, "a")
		time.Sleep(time.Second)
		o := &elect.Owner{Store: m.Handle(), Group: "ingest", Partitions: 8, Member: "b",
			LeaseDuration: ownerTTL, RenewDeadline: ownerG, RetryPeriod: ownerR,
			Started: func(int, *elect.Tenure) { t.Error("a member of the wrong count started a partition") }}
		err := o.Run(context.Background())
		if !errors.Is(err, lease.ErrPartitions) || !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Run with another partition count = %v, want ErrPartitions and ErrRefused", err)
		}
		a.leave(t)
	})
}

// TestHeldOffPartitionIsTakenWhenTheHoldOffEnds: a partition whose work
// ended on its own is released and held off for a restart delay; the owner
// takes it again when the delay ends, not a reconcile interval later.
func TestHeldOffPartitionIsTakenWhenTheHoldOffEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 3 * time.Second
		m := &leasetest.Memory{}
		var (
			mu     sync.Mutex
			starts []time.Time // of partition 0's tenures
			o      *elect.Owner
		)
		o = &elect.Owner{Store: m.Handle(), Group: "ingest", Partitions: 2, Member: "a",
			LeaseDuration: ownerTTL, RenewDeadline: ownerG, RetryPeriod: ownerR, ReconcileInterval: reconcileI,
			Started: func(p int, ten *elect.Tenure) {
				mu.Lock()
				defer mu.Unlock()
				if p == 0 {
					starts = append(starts, time.Now())
				}
				first := p == 0 && len(starts) == 1
				go func() {
					if first { // partition 0's first run exits at once
						o.HoldOff(0, time.Now().Add(delay))
					} else {
						<-ten.Context().Done()
					}
					ten.Release(context.Background())
				}()
			}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- o.Run(ctx) }()
		time.Sleep(2 * reconcileI)
		mu.Lock()
		if len(starts) != 2 {
			t.Fatalf("partition 0 started %d times, want 2", len(starts))
		}
		if gap := starts[1].Sub(starts[0]); gap < delay || gap > delay+time.Second {
			t.Errorf("partition 0 started again %v after its work ended, want the hold-off %v (not the reconcile interval %v)",
				gap, delay, reconcileI)
		}
		mu.Unlock()
		cancel()
		<-done
	})
}
