package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
)

// Short timings for elections driven by these tests: etcd's test clusters
// re-elect within about two election timeouts (1.2 s), well within G.
const (
	testL = 5 * time.Second
	testG = 3 * time.Second
	testR = 300 * time.Millisecond
)

// renewals reports an Elector's successful renewals.
type renewals struct{ ok chan struct{} }

func newRenewals() *renewals { return &renewals{ok: make(chan struct{}, 1000)} }

func (r *renewals) observe(op string, _ time.Duration, err error) {
	if op == "renew" && err == nil {
		select {
		case r.ok <- struct{}{}:
		default: // nobody counts that many
		}
	}
}

// waitMore drains the renewals seen so far, then returns once n more
// succeeded, or fails t after limit.
func (r *renewals) waitMore(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	for len(r.ok) > 0 {
		<-r.ok
	}
	deadline := time.After(limit)
	for i := range n {
		select {
		case <-r.ok:
		case <-deadline:
			t.Fatalf("%d renewals succeeded within %v, want %d", i, limit, n)
		}
	}
}

func campaign(t *testing.T, s lease.Store, name, holder string, r *renewals) *elect.Tenure {
	t.Helper()
	e := &elect.Elector{Store: s, Name: name, Holder: holder,
		LeaseDuration: testL, RenewDeadline: testG, RetryPeriod: testR}
	if r != nil {
		e.Observe = r.observe
	}
	tenure, err := e.Campaign(testCtx(t))
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tenure.Release(ctx)
	})
	return tenure
}

// TestClusterFaults kills and restarts members of a cluster of its own.
func TestClusterFaults(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	t.Run("LeaderKilledKeepsTenure", func(t *testing.T) { testLeaderKilled(t, c) })
	t.Run("MemberRestartedKeepsTokens", func(t *testing.T) { testMemberRestarted(t, c) })
	t.Run("ClusterRestartedKeepsTokens", func(t *testing.T) { testClusterRestarted(t, c) })
}

// healthy waits until every running member of c agrees on a leader.
func healthy(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("cluster not healthy: %v", err)
	}
}

// testLeaderKilled kills etcd's leader with SIGKILL while a tenure renews:
// etcd elects another well within G and extends every lease on the new
// leader, so the tenure must go on.
func testLeaderKilled(t *testing.T, c *etcdtest.Cluster) {
	prefix := etcdtest.RandomPrefix()
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	r := newRenewals()
	tenure := campaign(t, s, "n", "a", r)
	r.waitMore(t, 2, 5*time.Second)

	ctx := testCtx(t)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := c.Member(leader)
	killed.Kill()
	t.Cleanup(func() {
		if err := killed.Start(); err != nil {
			t.Error(err)
		}
		healthy(t, c)
	})
	start := time.Now()
	healthy(t, c)
	t.Logf("killed etcd leader %s; the others elected another in %v", killed.Name, time.Since(start).Round(time.Millisecond))
	// Three renewals after the new election, each counted from its send.
	r.waitMore(t, 3, 2*testG)
	if err := tenure.Context().Err(); err != nil {
		t.Fatalf("tenure ended after etcd's leader was killed: %v", context.Cause(tenure.Context()))
	}
	t.Logf("tenure kept; %v after the kill", time.Since(start).Round(time.Millisecond))
}

// transient retries op while it fails with an error a retry may fix, as
// the Elector would: after a member restarts, etcd answers some requests
// with "leader changed" until it caught up.
func transient(t *testing.T, what string, op func() error) error {
	t.Helper()
	var err error
	for range 20 {
		err = op()
		var held *lease.HeldError
		if err == nil || errors.Is(err, lease.ErrLost) || errors.As(err, &held) || errors.Is(err, lease.ErrNotFound) {
			return err
		}
		t.Logf("%s: %v (retrying)", what, err)
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// acquireRelease acquires and releases name n times and returns the last
// token. An Acquire whose outcome was unknown and is retried finds the
// name held by itself: that grant counts.
func acquireRelease(t *testing.T, s lease.Store, name string, n int, last int64) int64 {
	t.Helper()
	for i := range n {
		var rec lease.Record
		err := transient(t, "acquire", func() error {
			var err error
			rec, err = s.Acquire(testCtx(t), name, "a", time.Minute)
			var held *lease.HeldError
			if errors.As(err, &held) && held.Record.Holder == "a" && !held.Record.Released {
				rec, err = held.Record, nil
			}
			return err
		})
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		if rec.Token <= last {
			t.Fatalf("token %d, want > %d", rec.Token, last)
		}
		last = rec.Token
		err = transient(t, "release", func() error { return s.Release(testCtx(t), name, "a", rec.Token) })
		if errors.Is(err, lease.ErrLost) {
			// A release retried after an unknown outcome: it happened if
			// the record says so.
			if cur, gerr := s.Get(testCtx(t), name); gerr == nil && cur.Token == rec.Token && cur.Released {
				err = nil
			}
		}
		if err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	return last
}

// testMemberRestarted stops one member while tenures come and go on the
// others, restarts it with its data, and acquires through it alone: the
// token must exceed every earlier one, which only the replicated record can
// make sure of within the same millisecond.
func testMemberRestarted(t *testing.T, c *etcdtest.Cluster) {
	prefix := etcdtest.RandomPrefix()
	all := openStore(t, dsnFor(prefix, c.Endpoints()...))
	last := acquireRelease(t, all, "n", 3, 0)

	m := c.Member(0)
	m.Kill()
	last = acquireRelease(t, all, "n", 3, last)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	healthy(t, c)
	only := openStore(t, dsnFor(prefix, m.ClientAddr))
	var rec lease.Record
	err := transient(t, "get", func() error {
		var err error
		rec, err = only.Get(testCtx(t), "n")
		return err
	})
	if err != nil {
		t.Fatalf("Get through the restarted member: %v", err)
	}
	if rec.Token != last || rec.State() != "released" {
		t.Errorf("record through the restarted member = %+v, want released with token %d", rec, last)
	}
	acquireRelease(t, only, "n", 3, last)
}

// testClusterRestarted kills every member at once and restarts them with
// their data: the records, and so the tokens, survive.
func testClusterRestarted(t *testing.T, c *etcdtest.Cluster) {
	prefix := etcdtest.RandomPrefix()
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	last := acquireRelease(t, s, "n", 3, 0)
	var held lease.Record
	err := transient(t, "acquire", func() error {
		var err error
		held, err = s.Acquire(testCtx(t), "held", "a", time.Minute)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Members() {
		m.Kill()
	}
	for _, m := range c.Members() {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	healthy(t, c)
	acquireRelease(t, s, "n", 3, last)
	// The tenure's etcd lease outlived the restart (etcd keeps leases with
	// their full TTL), so its holder still renews it.
	err = transient(t, "renew", func() error {
		_, err := s.Renew(testCtx(t), "held", "a", held.Token, time.Minute)
		return err
	})
	if err != nil {
		t.Errorf("Renew after the cluster restarted: %v", err)
	}
}

// TestCutOffEndsTenureByDeadline puts a proxy in front of every member and
// blackholes them all: renewals hang, the tenure must end by G after its
// last successful renewal was sent, and another replica, on a direct
// connection, may acquire the name only after that.
func TestCutOffEndsTenureByDeadline(t *testing.T) {
	c, prefix := newPrefix(t)
	var proxies []*tcpproxy.Proxy
	var addrs []string
	for _, ep := range c.Endpoints() {
		p, err := tcpproxy.New(ep)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	cut := openStore(t, dsnFor(prefix, addrs...))
	r := newRenewals()
	tenure := campaign(t, cut, "n", "a", r)
	r.waitMore(t, 2, 5*time.Second)

	for _, p := range proxies {
		p.Blackhole()
	}
	blackholed := time.Now()
	select {
	case <-tenure.Context().Done():
	case <-time.After(testG + 5*time.Second):
		t.Fatal("tenure still trusted long after every member was cut off")
	}
	ended := time.Now()
	if cause := context.Cause(tenure.Context()); !errors.Is(cause, elect.ErrDeadline) {
		t.Errorf("tenure ended with %v, want ErrDeadline", cause)
	}
	// The last successful renewal was sent before the cut, so G after it
	// is at most G after the cut (plus the tenure's 100 ms clock tick).
	if lag := ended.Sub(blackholed); lag > testG+300*time.Millisecond {
		t.Errorf("tenure ended %v after the cut, want by G = %v", lag, testG)
	}
	t.Logf("tenure ended %v after every member was cut off (G = %v)", ended.Sub(blackholed).Round(time.Millisecond), testG)

	direct := openStore(t, dsnFor(prefix, c.Endpoints()...))
	next := campaign(t, direct, "n", "b", nil)
	took := time.Now()
	if took.Before(ended) {
		t.Errorf("another replica acquired the name %v before the cut-off tenure ended", ended.Sub(took))
	}
	t.Logf("the other replica acquired the name %v after the cut (L = %v), token %d", took.Sub(blackholed).Round(time.Millisecond), testL, next.Token())
	for _, p := range proxies {
		p.Pass()
	}
}

// TestCompactedWatchStillWakes breaks a waiting follower's connection
// while etcd's history is compacted past the revision its watch has seen:
// when the connection comes back, the client resumes the watch from that
// revision, etcd answers ErrCompacted, and the follower must watch and read
// again, and still wake when the name is released.
func TestCompactedWatchStillWakes(t *testing.T) {
	c, prefix := newPrefix(t)
	proxy, err := tcpproxy.New(c.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	a := openStore(t, dsnFor(prefix, c.Endpoints()...))
	b := openStore(t, dsnFor(prefix, proxy.Addr()))
	admin := c.Client(t)
	rec, err := a.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(testCtx(t), "n", "b", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("follower's Acquire = %v, want *lease.HeldError", err)
	}
	watching := make(chan struct{}, 10)
	b.waiting = func() { watching <- struct{}{} }
	woke := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := b.Wait(testCtx(t), "n", held.Record, time.Until(deadline))
			cur, gerr := b.Get(testCtx(t), "n")
			if err != nil || gerr != nil || !lease.SameTenure(cur, held.Record) || time.Now().After(deadline) {
				woke <- errors.Join(err, gerr)
				return
			}
		}
	}()
	waitWatching := func(what string) {
		t.Helper()
		select {
		case <-watching:
		case <-time.After(20 * time.Second):
			t.Fatalf("the follower did not %s", what)
		}
	}
	waitWatching("start to wait")
	proxy.Reset()
	ctx := testCtx(t)
	var rev int64
	for i := range 3 {
		resp, err := admin.Put(ctx, prefix+"/other", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := admin.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	proxy.Pass()
	start := time.Now()
	waitWatching("wait again after its resumed watch was compacted")
	t.Logf("compacted to revision %d; the follower waited again %v after its connection came back",
		rev, time.Since(start).Round(time.Millisecond))

	released := time.Now()
	if err := a.Release(testCtx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		lag := time.Since(released)
		t.Logf("follower woke %v after the release", lag.Round(time.Millisecond))
		if lag > time.Second {
			t.Errorf("follower woke %v after the release, want within 1s (woken, not timed out)", lag)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("follower did not wake after the release")
	}
}
