package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
)

// replicated is a private primary and a replica whose replication link
// runs through a proxy, so that a test can hold writes back from the
// replica and then fail over to it.
type replicated struct {
	primary, replica *redistest.Server
	link             *tcpproxy.Proxy
}

func startReplicated(t *testing.T) replicated {
	t.Helper()
	primary := redistest.StartServer(t, "--repl-diskless-sync-delay", "0")
	link, err := tcpproxy.New(primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	host, port, _ := strings.Cut(link.Addr(), ":")
	replica := redistest.StartServer(t, "--replicaof", host, port)
	// The witness that the replica is in sync: it acknowledges a write.
	admin := adminClient(t, primary.URL())
	if err := admin.Set(testCtx(t), "lrtest-sync", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Wait(testCtx(t), 1, 10*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("replica not in sync: WAIT = %d, %v", n, err)
	}
	return replicated{primary: primary, replica: replica, link: link}
}

// failover promotes the replica, as Sentinel would after the primary
// failed.
func (r replicated) failover(t *testing.T) {
	t.Helper()
	if err := adminClient(t, r.replica.URL()).Do(testCtx(t), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverLosesGrantWithoutWait shows what Redis cannot promise: a
// grant the primary acknowledged but had not yet replicated is gone after
// a failover, and a second holder is granted the same name while the first
// still trusts its tenure. Only fencing protects then; the token of the
// second tenure is still greater (the clock floor).
func TestFailoverLosesGrantWithoutWait(t *testing.T) {
	r := startReplicated(t)
	a := openStore(t, r.primary.URL())
	r.link.Blackhole() // the primary's writes no longer reach the replica
	first, err := a.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire on the primary: %v", err)
	}
	r.failover(t)
	b := openStore(t, r.replica.URL())
	second, err := b.Acquire(testCtx(t), "n", "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire on the promoted replica = %v; the point of this test is that it is granted", err)
	}
	t.Logf("overlap: a holds token %d on the old primary, b was granted token %d on the new one", first.Token, second.Token)
	if second.Token <= first.Token {
		t.Errorf("token after the failover = %d, want > %d (the clock floor)", second.Token, first.Token)
	}
}

// TestWaitReplicasKeepsGrantsAcrossFailover is the same failover with
// leaderrun_wait_replicas=1: a grant that the replica did not acknowledge
// is reported as an error (not trusted), and one it did acknowledge
// survives the failover, so the second holder is refused. It also logs
// what WAIT costs an Acquire and a Renew.
func TestWaitReplicasKeepsGrantsAcrossFailover(t *testing.T) {
	r := startReplicated(t)
	plain := openStore(t, r.primary.URL())
	waiting := openStore(t, r.primary.URL()+"?leaderrun_wait_replicas=1")

	for _, s := range []*Store{plain, waiting} {
		ctx := testCtx(t)
		rec, err := s.Acquire(ctx, "cost", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		const n = 50
		start := time.Now()
		for range n {
			if _, err := s.Renew(ctx, "cost", "a", rec.Token, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wait_replicas=%d: a Renew takes %v on average", s.waitReplicas, (time.Since(start) / n).Round(time.Microsecond))
		if err := s.Release(ctx, "cost", "a", rec.Token); err != nil {
			t.Fatal(err)
		}
	}

	granted, err := waiting.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire with the replica in sync: %v", err)
	}
	r.link.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = waiting.Acquire(ctx, "m", "a", time.Minute)
	if err == nil || isHeld(err) || errors.Is(err, lease.ErrRefused) {
		t.Errorf("Acquire the replica cannot acknowledge = %v, want a plain error (outcome unknown, not trusted)", err)
	}
	t.Logf("unacknowledged grant: %v", err)

	r.failover(t)
	b := openStore(t, r.replica.URL())
	_, err = b.Acquire(testCtx(t), "n", "b", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Record.Token != granted.Token {
		t.Errorf("Acquire on the promoted replica = %v, want refused: a holds token %d", err, granted.Token)
	}
}
