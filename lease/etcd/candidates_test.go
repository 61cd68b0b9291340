package etcd

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// TestOldLeaderrunCandidates: a leaderrun that knows no attributes (as of
// 8cae9b5, a refusal put the candidate key alone, its value the seen-until
// in Unix ms) keeps working beside this one: its candidates read as the
// zero Candidacy; its refusal of a campaigner under the same identity
// keeps what the campaigner said; and when it swept a candidate and
// recorded it again, the attributes left behind count for nothing and the
// next grant here deletes them.
func TestOldLeaderrunCandidates(t *testing.T) {
	c, prefix := newPrefix(t)
	s := openStore(t, dsnFor(prefix, c.Endpoints()...))
	admin := c.Client(t)
	ctx := testCtx(t)
	const ttl = 10 * time.Second
	k := s.keysOf("n")
	oldRefusal := func(holder string) {
		t.Helper()
		until := time.Now().Add(2 * ttl).UnixMilli()
		if _, err := admin.Put(ctx, k.candidates+escape(holder), strconv.FormatInt(until, 10)); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := s.Acquire(ctx, "n", "h", ttl)
	if err != nil {
		t.Fatal(err)
	}
	said := lease.Candidacy{Priority: 3, Preempt: true, Note: "a \"b\"\n"}
	for _, who := range []string{"a", "swept"} {
		if err := s.Campaign(ctx, "n", who, said, ttl); err != nil {
			t.Fatal(err)
		}
	}
	oldRefusal("old")
	oldRefusal("a")
	if _, err := admin.Delete(ctx, k.candidates+escape("swept")); err != nil {
		t.Fatal(err)
	}
	oldRefusal("swept")
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Holder != "a" || got[1].Holder != "old" || got[2].Holder != "swept" {
		t.Fatalf("Candidates = %+v, want a, old and swept", got)
	}
	if got[0].Candidacy != said {
		t.Errorf("a reads %+v after an old refusal, want %+v", got[0].Candidacy, said)
	}
	for _, c := range got[1:] {
		if c.Candidacy != (lease.Candidacy{}) || c.Seen <= ttl {
			t.Errorf("%s reads %+v, seen %v more; want the zero Candidacy, seen for more than %v", c.Holder, c.Candidacy, c.Seen, ttl)
		}
	}
	// The next grant sweeps the orphaned attributes.
	if err := s.Release(ctx, "n", "h", rec.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "n", "b", ttl); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Get(ctx, k.attrs+escape("swept"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("orphaned attributes %s left after a grant", resp.Kvs[0].Value)
	}
}

// TestFreshRefusalWritesNothing: a refusal leaves a candidacy that is
// still lease.Candidate.Fresh as it is (the candidate key's revision stays)
// on both of its paths, a handle that last saw the name held (probe) and
// one that reads it first (refuse), and writes one that is no longer
// Fresh again.
func TestFreshRefusalWritesNothing(t *testing.T) {
	c, prefix := newPrefix(t)
	dsn := dsnFor(prefix, c.Endpoints()...)
	admin := c.Client(t)
	ctx := testCtx(t)
	const ttl = 10 * time.Second
	leader := openStore(t, dsn)
	if _, err := leader.Acquire(ctx, "n", "a", ttl); err != nil {
		t.Fatal(err)
	}
	key := leader.keysOf("n").candidates + escape("b")
	written := func() (int64, time.Time) {
		t.Helper()
		resp, err := admin.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 {
			t.Fatalf("candidate key %s: %d keys", key, len(resp.Kvs))
		}
		ms, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Kvs[0].ModRevision, time.UnixMilli(ms)
	}
	refuse := func(s *Store) {
		t.Helper()
		var held *lease.HeldError
		if _, err := s.Acquire(ctx, "n", "b", ttl); !errors.As(err, &held) {
			t.Fatalf("Acquire by b: %v, want a *HeldError", err)
		}
	}
	follower := openStore(t, dsn)
	refuse(follower) // records b
	rev, _ := written()
	refuse(follower) // probe: the handle saw the name held
	refuse(openStore(t, dsn))
	if got, _ := written(); got != rev {
		t.Errorf("a fresh candidacy was written again: revision %d, then %d", rev, got)
	}

	// Seen for less than ttl more: no longer Fresh, written on each path.
	for _, s := range []*Store{follower, openStore(t, dsn)} {
		stale := time.Now().Add(ttl / 2).UnixMilli()
		if _, err := admin.Put(ctx, key, strconv.FormatInt(stale, 10)); err != nil {
			t.Fatal(err)
		}
		before, _ := written()
		refuse(s)
		if got, until := written(); got == before || time.Until(until) <= ttl {
			t.Errorf("a candidacy seen for %v more was left as it is: revision %d, then %d, seen until %v", ttl/2, before, got, until)
		}
	}
}
