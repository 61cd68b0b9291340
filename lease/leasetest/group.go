package leasetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The group cases: membership, the partition count, renewal rounds and
// group wake-ups.

func mustJoin(t *testing.T, s lease.Store, group string, n int, member string) lease.Group {
	t.Helper()
	return mustJoinFor(t, s, group, n, member, ttl)
}

func mustJoinFor(t *testing.T, s lease.Store, group string, n int, member string, d time.Duration) lease.Group {
	t.Helper()
	g, err := s.Join(ctx(t), group, n, member, d)
	if err != nil {
		t.Fatalf("Join(%q, %d, %q): %v", group, n, member, err)
	}
	if g.Name != group || g.Partitions != n || len(g.Leases) != n || !slices.Contains(g.Identities(), member) {
		t.Fatalf("Join(%q, %d, %q) = %+v, want the group with its %d partitions and the member", group, n, member, g, n)
	}
	return g
}

func mustGetGroup(t *testing.T, s lease.Store, group string) lease.Group {
	t.Helper()
	g, err := s.GetGroup(ctx(t), group)
	if err != nil {
		t.Fatalf("GetGroup(%q): %v", group, err)
	}
	return g
}

func wantMembers(t *testing.T, g lease.Group, want ...string) {
	t.Helper()
	if got := g.Identities(); !slices.Equal(got, want) {
		t.Errorf("live members = %q, want %q", got, want)
	}
	for _, m := range g.Members {
		if m.Remaining <= 0 {
			t.Errorf("member %q listed with %v left", m.Identity, m.Remaining)
		}
	}
}

func testGroupMembers(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	// a's record lives long enough to be seen beside b's on a loaded
	// machine, and then expires.
	const short = 2 * time.Second
	mustJoinFor(t, a, "g", 4, "a", short)
	g := mustJoin(t, b, "g", 4, "b")
	wantMembers(t, g, "a", "b")
	for p, rec := range g.Leases {
		if rec.Exists() || rec.Name != lease.PartitionKey("g", p) {
			t.Errorf("partition %d of a new group = %+v, want an absent record named %q", p, rec, lease.PartitionKey("g", p))
		}
	}
	for deadline := time.Now().Add(short + time.Minute); ; time.Sleep(50 * time.Millisecond) {
		g = mustGetGroup(t, b, "g")
		if !slices.Contains(g.Identities(), "a") || time.Now().After(deadline) {
			break
		}
	}
	wantMembers(t, g, "b") // a's record expired
	if err := b.Leave(ctx(t), "g", "b"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	wantMembers(t, mustGetGroup(t, a, "g"))
	if err := b.Leave(ctx(t), "g", "b"); err != nil {
		t.Errorf("second Leave = %v, want nil", err)
	}
	// A renewal round brings an expired or departed member back.
	g, err := a.RenewMember(ctx(t), "g", "a", nil, ttl)
	if err != nil {
		t.Fatalf("RenewMember: %v", err)
	}
	wantMembers(t, g, "a")
}

func testGroupPartitionCount(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	mustJoin(t, a, "g", 4, "a")
	_, err := b.Join(ctx(t), "g", 8, "b", ttl)
	var pe *lease.PartitionsError
	if !errors.As(err, &pe) || !errors.Is(err, lease.ErrRefused) {
		t.Fatalf("Join with another partition count = %v, want *lease.PartitionsError wrapping ErrRefused", err)
	}
	if pe.Have != 4 || pe.Want != 8 || pe.Group != "g" {
		t.Errorf("PartitionsError = %+v, want group g, have 4, want 8", pe)
	}
	g := mustGetGroup(t, a, "g")
	if g.Partitions != 4 {
		t.Errorf("partitions after a refused Join = %d, want 4", g.Partitions)
	}
	wantMembers(t, g, "a")
}

func testGroupBadInput(t *testing.T, h Harness) {
	a := open(t, h)
	for _, tc := range []struct {
		partitions int
		member     string
	}{
		{0, "a"}, {-1, "a"}, {lease.MaxPartitions + 1, "a"}, {4, ""}, {4, "bad\nid"},
	} {
		if _, err := a.Join(ctx(t), "g", tc.partitions, tc.member, ttl); !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Join(g, %d, %q) = %v, want ErrRefused", tc.partitions, tc.member, err)
		}
	}
	if _, err := a.GetGroup(ctx(t), "g"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("GetGroup after refused Joins = %v, want ErrNotFound (nothing written)", err)
	}
	if _, err := a.RenewMember(ctx(t), "never", "a", nil, ttl); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("RenewMember of a group never joined = %v, want ErrNotFound", err)
	}
	if err := a.Leave(ctx(t), "never", "a"); err != nil {
		t.Errorf("Leave of a group never joined = %v, want nil", err)
	}
}

func testGroupRenew(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	const short = 2 * time.Second
	mustJoin(t, a, "g", 4, "a")
	mustJoin(t, b, "g", 4, "b")
	p0 := mustAcquire(t, a, lease.PartitionKey("g", 0), "a", short)
	p1 := mustAcquire(t, a, lease.PartitionKey("g", 1), "a", short)
	// Partition 2 was a's, then released and taken by b.
	p2 := mustAcquire(t, a, lease.PartitionKey("g", 2), "a", short)
	mustRelease(t, a, p2)
	p2b := mustAcquire(t, b, lease.PartitionKey("g", 2), "b", ttl)
	// Partition 3 was a's and expired, untaken.
	p3 := mustAcquire(t, a, lease.PartitionKey("g", 3), "a", 300*time.Millisecond)
	waitExpired(p3)

	claims := []lease.Claim{{Partition: 0, Token: p0.Token}, {Partition: 1, Token: p1.Token}, {Partition: 2, Token: p2.Token}, {Partition: 3, Token: p3.Token}}
	g, err := a.RenewMember(ctx(t), "g", "a", claims, ttl)
	if err != nil {
		t.Fatalf("RenewMember: %v", err)
	}
	for _, c := range claims {
		want := c.Partition < 2
		if got := g.Holds(c.Partition, "a", c.Token); got != want {
			t.Errorf("after the round, a holds partition %d = %v, want %v (record %+v)", c.Partition, got, want, g.Leases[c.Partition])
		}
	}
	for _, p := range []int{0, 1} {
		if r := g.Leases[p].Remaining; r <= short {
			t.Errorf("partition %d has %v left after the round, want about %v", p, r, ttl)
		}
	}
	if !g.Holds(2, "b", p2b.Token) {
		t.Errorf("partition 2 = %+v, want still b's", g.Leases[2])
	}
	if g.Leases[3].Held() {
		t.Errorf("partition 3 = %+v, want still expired: a round must not revive a lost lease", g.Leases[3])
	}
	wantMembers(t, g, "a", "b")
}

// testGroupRenewsOnlyClaims: a partition granted to a member that its
// rounds never claim (a grant whose answer the member never got, say: the
// call timed out after the store applied it) expires after its TTL,
// although the member keeps renewing with the same TTL; nothing else
// would ever free it.
func testGroupRenewsOnlyClaims(t *testing.T, h Harness) {
	a := open(t, h)
	const short = 2 * time.Second
	mustJoinFor(t, a, "g", 4, "a", short)
	orphan := mustAcquire(t, a, lease.PartitionKey("g", 0), "a", short)
	kept := mustAcquire(t, a, lease.PartitionKey("g", 1), "a", short)
	claims := []lease.Claim{{Partition: 1, Token: kept.Token}}
	deadline := time.Now().Add(short + 1500*time.Millisecond)
	var g lease.Group
	for time.Now().Before(deadline) {
		var err error
		if g, err = a.RenewMember(ctx(t), "g", "a", claims, short); err != nil {
			t.Fatalf("RenewMember: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if g.Holds(0, "a", orphan.Token) {
		t.Errorf("partition 0 = %+v %v after it was granted, never claimed, with a TTL of %v: want expired",
			g.Leases[0], short+1500*time.Millisecond, short)
	}
	if !g.Holds(1, "a", kept.Token) {
		t.Errorf("partition 1 = %+v, want still a's: its rounds claim it", g.Leases[1])
	}
	wantMembers(t, g, "a")
}

func testGroupContendedPartition(t *testing.T, h Harness) {
	key := lease.PartitionKey("g", 5)
	won := race(t, h, contenders, func(s lease.Store, holder string) (lease.Record, error) {
		if _, err := s.Join(ctx(t), "g", 8, holder, ttl); err != nil {
			return lease.Record{}, err
		}
		return s.Acquire(ctx(t), key, holder, ttl)
	})
	g := mustGetGroup(t, open(t, h), "g")
	if !g.Holds(5, won.Holder, won.Token) {
		t.Errorf("partition 5 = %+v, want held by the winner %+v", g.Leases[5], won)
	}
	if len(g.Members) != contenders {
		t.Errorf("%d live members, want %d", len(g.Members), contenders)
	}
}

func testGroupTokens(t *testing.T, h Harness) {
	a := open(t, h)
	mustJoin(t, a, "g", 2, "a")
	last := map[int]int64{}
	for round := range 3 {
		for p := range 2 {
			rec := mustAcquire(t, a, lease.PartitionKey("g", p), fmt.Sprintf("h%d", round), ttl)
			if rec.Token <= last[p] {
				t.Errorf("round %d, partition %d: token %d, want > %d", round, p, rec.Token, last[p])
			}
			last[p] = rec.Token
			mustRelease(t, a, rec)
		}
	}
	g := mustGetGroup(t, a, "g")
	for p := range 2 {
		if g.Leases[p].Token != last[p] || g.Leases[p].State() != "released" {
			t.Errorf("partition %d in the group = %+v, want released with token %d", p, g.Leases[p], last[p])
		}
	}
}

// waitGroupInBackground starts s.WaitGroup from seen, re-checking until the
// group differs from seen, and reports when it returned.
func waitGroupInBackground(t *testing.T, s lease.Store, group string, seen lease.Group) <-chan time.Time {
	woke := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(waitTimeout)
		for time.Now().Before(deadline) {
			g, err := s.WaitGroup(ctx(t), group, seen, time.Until(deadline))
			if err != nil {
				t.Errorf("WaitGroup: %v", err)
				break
			}
			cur, err := s.GetGroup(ctx(t), group)
			if g.Name != "" {
				// It read the change: what it returns is the group as the
				// store has it (the step made one change).
				if lease.SameGroup(g, seen) {
					t.Errorf("WaitGroup returned a group that is the same as seen: %+v", g)
				}
				if err == nil && !lease.SameGroup(g, cur) {
					t.Errorf("WaitGroup returned %+v; GetGroup after it: %+v", g, cur)
				}
				break
			}
			if err == nil && !lease.SameGroup(cur, seen) {
				break
			}
		}
		woke <- time.Now()
	}()
	return woke
}

func testGroupWait(t *testing.T, h Harness) {
	a, b, w := open(t, h), open(t, h), open(t, h)
	mustJoin(t, a, "g", 4, "a")
	steps := []struct {
		what string
		do   func()
	}{
		{"a member joins", func() { mustJoin(t, b, "g", 4, "b") }},
		{"a partition is acquired", func() { mustAcquire(t, a, lease.PartitionKey("g", 1), "a", ttl) }},
		{"a partition is asked to step down", func() { mustStepDown(t, b, lease.PartitionKey("g", 1), "", time.Minute) }},
		{"a partition is released", func() {
			rec, err := a.Get(ctx(t), lease.PartitionKey("g", 1))
			if err != nil {
				t.Fatal(err)
			}
			mustRelease(t, a, rec)
		}},
		{"a member leaves", func() {
			if err := b.Leave(ctx(t), "g", "b"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		seen := mustGetGroup(t, w, "g")
		woke := waitGroupInBackground(t, w, "g", seen)
		// A renewal round is not a change: it may wake the waiter, which
		// then waits again.
		if _, err := a.RenewMember(ctx(t), "g", "a", nil, ttl); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		step.do()
		t.Run(step.what, func(t *testing.T) { wantWoken(t, woke, changed) })
	}
}

func testGroupWaitEarlier(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	seen := mustJoin(t, a, "g", 4, "a")
	mustJoin(t, b, "g", 4, "b") // lands before the Wait
	start := time.Now()
	g, err := a.WaitGroup(ctx(t), "g", seen, waitTimeout)
	if err != nil {
		t.Fatalf("WaitGroup: %v", err)
	}
	if lag := time.Since(start); lag > wakeLimit {
		t.Errorf("WaitGroup after an earlier Join returned after %v, want at once", lag)
	}
	if g.Name != "" && !slices.Equal(g.Identities(), []string{"a", "b"}) {
		t.Errorf("WaitGroup after an earlier Join returned members %v, want [a b]", g.Identities())
	}
	// From absent: a group that exists since.
	start = time.Now()
	if _, err := a.WaitGroup(ctx(t), "g", lease.Group{}, waitTimeout); err != nil {
		t.Fatalf("WaitGroup: %v", err)
	}
	if lag := time.Since(start); lag > wakeLimit {
		t.Errorf("WaitGroup from absent on an existing group returned after %v, want at once", lag)
	}
}
