package elect_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/leaderrun/leaderrun/elect"
)

func members(m int) []string {
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("host-%d:%d:%08x", i, 1000+i, uint32(i)*2654435761)
	}
	return ids
}

// TestTargetProperties: every partition is assigned exactly once, to a
// member, no member gets more than ⌈N/M⌉, and the assignment does not
// depend on the order of the members.
func TestTargetProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for m := 1; m <= 16; m++ {
		for _, n := range []int{1, 2, 3, 7, 16, 64, 100, 256, 1000, 1024} {
			ids := members(m)
			got := elect.Target("ingest", n, ids)
			limit := (n + m - 1) / m
			load := map[string]int{}
			for p, owner := range got {
				if !slices.Contains(ids, owner) {
					t.Fatalf("M=%d N=%d: partition %d assigned to %q, not a member", m, n, p, owner)
				}
				load[owner]++
			}
			for id, l := range load {
				if l > limit {
					t.Errorf("M=%d N=%d: %s owns %d partitions, more than ⌈N/M⌉ = %d", m, n, id, l, limit)
				}
			}
			shuffled := slices.Clone(ids)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if again := elect.Target("ingest", n, shuffled); !slices.Equal(again, got) {
				t.Errorf("M=%d N=%d: the assignment depends on the members' order", m, n)
			}
		}
	}
	if got := elect.Target("ingest", 4, nil); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Errorf("Target with no members = %q, want no owners", got)
	}
}

// TestTargetMovement measures how many partitions change hands when a
// member joins or leaves, against the ideal (the joiner's share, the
// leaver's share) and against plain rendezvous hashing (no cap), and the
// balance (max/min owned) of both. The design's target, for the benchmark's
// sizes (N ≥ 256): a join moves at most 1.5 × the ideal. With few
// partitions a single one is a large share, and the figures are only
// logged.
func TestTargetMovement(t *testing.T) {
	for _, tc := range []struct{ n, m int }{{16, 3}, {256, 4}, {1024, 4}, {1024, 16}} {
		before, after := members(tc.m), members(tc.m+1)
		joinBounded := moved(elect.Target("g", tc.n, before), elect.Target("g", tc.n, after))
		joinPlain := moved(plain("g", tc.n, before), plain("g", tc.n, after))
		leaveBounded := moved(elect.Target("g", tc.n, after), elect.Target("g", tc.n, before))
		leavePlain := moved(plain("g", tc.n, after), plain("g", tc.n, before))
		idealJoin := float64(tc.n) / float64(tc.m+1)
		idealLeave := float64(tc.n) / float64(tc.m+1)
		bmax, bmin := balance(elect.Target("g", tc.n, before))
		pmax, pmin := balance(plain("g", tc.n, before))
		t.Logf("N=%4d M=%2d: join moves %4d bounded, %4d plain (ideal %6.1f, ×%.2f); leave moves %4d bounded, %4d plain (ideal %6.1f); owned max/min %d/%d bounded, %d/%d plain",
			tc.n, tc.m, joinBounded, joinPlain, idealJoin, float64(joinBounded)/idealJoin,
			leaveBounded, leavePlain, idealLeave, bmax, bmin, pmax, pmin)
		if tc.n >= 256 && float64(joinBounded) > 1.5*idealJoin {
			t.Errorf("N=%d M=%d: a join moves %d partitions, more than 1.5 × the ideal %.1f", tc.n, tc.m, joinBounded, idealJoin)
		}
	}
}

func moved(a, b []string) int {
	n := 0
	for p := range a {
		if a[p] != b[p] {
			n++
		}
	}
	return n
}

// plain is rendezvous hashing without a cap: the highest score wins.
func plain(group string, n int, ids []string) []string {
	out := make([]string, n)
	for p := range n {
		out[p] = elect.Fallback(group, p, ids, "")
	}
	return out
}

func balance(owners []string) (hi, lo int) {
	load := map[string]int{}
	for _, o := range owners {
		load[o]++
	}
	lo = len(owners)
	for _, l := range load {
		hi, lo = max(hi, l), min(lo, l)
	}
	return hi, lo
}

func TestFallbackSkipsTheOwner(t *testing.T) {
	ids := members(3)
	for p := range 32 {
		owner := elect.Target("g", 32, ids)[p]
		fb := elect.Fallback("g", p, ids, owner)
		if fb == owner || !slices.Contains(ids, fb) {
			t.Errorf("partition %d: fallback %q for owner %q", p, fb, owner)
		}
	}
	if got := elect.Fallback("g", 0, []string{"a"}, "a"); got != "" {
		t.Errorf("fallback with only the owner = %q, want none", got)
	}
}
