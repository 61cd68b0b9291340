package elect

import (
	"cmp"
	"slices"
)

// Target assigns the partitions 0 … n−1 of group to members: partition p
// goes to the member with the highest rendezvous score hash(group, p,
// member) among those not yet at the cap of ⌈n/len(members)⌉ partitions.
// Pairs are taken in descending order of score across all partitions
// (ties broken by partition, then by identity), so each member keeps the
// partitions it scores best on, and a join or a leave moves few more than
// the ideal n/len(members).
//
// It is a pure function of its arguments: every member derives the same
// assignment from the same set, whatever its order, and nothing depends on
// the caller, the clock or map order. The result is indexed by partition;
// with no members it is all empty.
func Target(group string, n int, members []string) []string {
	owners := make([]string, n)
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	if len(ms) == 0 || n <= 0 {
		return owners
	}
	limit := (n + len(ms) - 1) / len(ms)
	type pair struct {
		score     uint64
		partition int
		member    int
	}
	pairs := make([]pair, 0, n*len(ms))
	for p := range n {
		for i, m := range ms {
			pairs = append(pairs, pair{Score(group, p, m), p, i})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.partition, b.partition); c != 0 {
			return c
		}
		return cmp.Compare(a.member, b.member)
	})
	load := make([]int, len(ms))
	left := n
	for _, pr := range pairs {
		if owners[pr.partition] != "" || load[pr.member] == limit {
			continue
		}
		owners[pr.partition] = ms[pr.member]
		load[pr.member]++
		if left--; left == 0 {
			break
		}
	}
	return owners
}

// Fallback is the member that takes partition p while its target owner
// may not (a step-down reservation against it): the one with the highest
// score among the others. It returns "" when there is no other member.
func Fallback(group string, p int, members []string, owner string) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		if m == owner {
			continue
		}
		if s := Score(group, p, m); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// Score is the rendezvous score of member for partition p of group: FNV-1a
// over the three, finished with SplitMix64's mixer so that nearby inputs
// give unrelated scores. It is the same on every platform.
func Score(group string, p int, member string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	add := func(b byte) { h = (h ^ uint64(b)) * prime }
	for i := 0; i < len(group); i++ {
		add(group[i])
	}
	add(0)
	for v, i := uint64(p), 0; i < 8; i++ {
		add(byte(v >> (8 * i)))
	}
	add(0)
	for i := 0; i < len(member); i++ {
		add(member[i])
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
