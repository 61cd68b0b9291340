package etcd

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// TestMemberLeaseIsShared checks how a member's partitions share its etcd
// lease: a partition is granted on a lease of its own (whatever its TTL),
// the next round that claims it moves it onto the member's, releasing
// one partition leaves the member and its other partitions alone, and a
// tenure's own Renew still works on the shared lease.
func TestMemberLeaseIsShared(t *testing.T) {
	c, prefix := newPrefix(t)
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	ctx := testCtx(t)
	const ttl = 10 * time.Second
	if _, err := s.Join(ctx, "g", 4, "a", ttl); err != nil {
		t.Fatal(err)
	}
	m, ok := s.leases.member("g", "a")
	if !ok {
		t.Fatal("no member lease after Join")
	}
	p0, err := s.Acquire(ctx, lease.PartitionKey("g", 0), "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := s.Acquire(ctx, lease.PartitionKey("g", 1), "a", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leaseOf := func(p int) clientv3.LeaseID {
		t.Helper()
		resp, err := s.client.Get(ctx, s.keysOf(lease.PartitionKey("g", p)).lease)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("lease key of partition %d: %v, %d keys", p, err, len(resp.Kvs))
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	own := map[int]clientv3.LeaseID{0: leaseOf(0), 1: leaseOf(1)}
	for p, id := range own {
		if id == m.id {
			t.Fatalf("partition %d is on the member's lease before any round claimed it", p)
		}
	}

	claims := []lease.Claim{{Partition: 0, Token: p0.Token}, {Partition: 1, Token: p1.Token}}
	g, err := s.RenewMember(ctx, "g", "a", claims, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Holds(0, "a", p0.Token) || !g.Holds(1, "a", p1.Token) {
		t.Fatalf("after the round the group is %+v, want both partitions a's", g)
	}
	for p, id := range own {
		if got := leaseOf(p); got != m.id {
			t.Errorf("after the round partition %d is on lease %x, want the member's %x", p, got, m.id)
		}
		if resp, err := s.client.TimeToLive(ctx, id); err != nil || resp.TTL != -1 {
			t.Errorf("partition %d's own lease after the move: TTL %v, %v; want revoked", p, resp, err)
		}
	}
	if _, err := s.Renew(ctx, lease.PartitionKey("g", 1), "a", p1.Token, ttl); err != nil {
		t.Errorf("Renew of a partition on the member's lease: %v", err)
	}

	if err := s.Release(ctx, lease.PartitionKey("g", 1), "a", p1.Token); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.client.TimeToLive(ctx, m.id); err != nil || resp.TTL <= 0 {
		t.Fatalf("member's lease after releasing one partition: %v, %v; want alive", resp, err)
	}
	g, err = s.GetGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if !g.Holds(0, "a", p0.Token) || g.Leases[1].State() != "released" || len(g.Members) != 1 {
		t.Errorf("after releasing partition 1 the group is %+v, want partition 0 held, 1 released, member a", g)
	}
	if _, err := s.Renew(ctx, lease.PartitionKey("g", 1), "a", p1.Token, ttl); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew of the released partition = %v, want ErrLost", err)
	}
}

// TestMemberExpiryEndsItsPartitions lets a member's lease expire: its
// record and every partition on its lease go at once, and the next round
// brings the member back without reviving them.
func TestMemberExpiryEndsItsPartitions(t *testing.T) {
	c, prefix := newPrefix(t)
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	ctx := testCtx(t)
	const ttl = time.Second
	if _, err := s.Join(ctx, "g", 2, "a", ttl); err != nil {
		t.Fatal(err)
	}
	var claims []lease.Claim
	var left time.Duration
	for p := range 2 {
		rec, err := s.Acquire(ctx, lease.PartitionKey("g", p), "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, lease.Claim{Partition: p, Token: rec.Token})
		left = max(left, rec.Remaining)
	}
	time.Sleep(left + 50*time.Millisecond) // the expiry is the thing under test
	g, err := s.GetGroup(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 0 || g.Leases[0].Held() || g.Leases[1].Held() {
		t.Fatalf("after the member's lease expired the group is %+v, want no member and no partition held", g)
	}
	g, err = s.RenewMember(ctx, "g", "a", claims, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Members) != 1 || g.Leases[0].Held() || g.Leases[1].Held() {
		t.Errorf("after the next round the group is %+v, want member a back and no partition revived", g)
	}
}

// TestUnclaimedPartitionOnMemberLeaseIsReleased: a partition whose tenure
// ended for its member without a release (its renewals failed past the
// deadline, then the release failed too) sits on the member's etcd lease.
// The member's next round, which no longer claims it, must release it:
// the member's lease is kept alive by those rounds, and the partition used
// to stay held by a tenure nobody served until the member left (chaos
// known defect D3).
func TestUnclaimedPartitionOnMemberLeaseIsReleased(t *testing.T) {
	c, prefix := newPrefix(t)
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	ctx := testCtx(t)
	const ttl = 2 * time.Second
	name := lease.PartitionKey("g", 0)
	for _, m := range []string{"a", "b"} {
		if _, err := s.Join(ctx, "g", 2, m, ttl); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := s.Acquire(ctx, name, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// One round claims it (it moves onto a's member lease); the next
	// rounds do not: a's tenure of it is over, unreleased.
	if _, err := s.RenewMember(ctx, "g", "a", []lease.Claim{{Partition: 0, Token: rec.Token}}, ttl); err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()
	for time.Since(claimed) < 3*ttl {
		for _, m := range []string{"a", "b"} {
			if _, err := s.RenewMember(ctx, "g", m, nil, ttl); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Acquire(ctx, name, "b", ttl)
		if err == nil {
			if got.Token <= rec.Token {
				t.Fatalf("b's token %d, want above a's %d", got.Token, rec.Token)
			}
			return
		}
		var he *lease.HeldError
		if !errors.As(err, &he) {
			t.Fatal(err)
		}
		time.Sleep(ttl / 4)
	}
	t.Fatalf("partition 0 still held %v after a's last claim of it (TTL %v)", time.Since(claimed).Round(time.Millisecond), ttl)
}
