package lease

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A group is a name whose work is split into partitions 0 … N−1, each a
// lease of its own (see PartitionKey), spread over the group's live
// members.

// MaxPartitions bounds the number of partitions of a group.
const MaxPartitions = 4096

// MaxIdentityLen bounds a holder identity.
const MaxIdentityLen = 200

// PartitionKey is the lease name of partition p of group: "ingest #3". It
// contains a space, which no lease name may (see package config), so a
// partition never collides with a name.
func PartitionKey(group string, p int) string {
	return group + " #" + strconv.Itoa(p)
}

// SplitPartitionKey is the inverse of PartitionKey: it reports whether key
// names a partition, and of which group.
func SplitPartitionKey(key string) (group string, p int, ok bool) {
	i := strings.LastIndex(key, " #")
	if i <= 0 {
		return "", 0, false
	}
	p, err := strconv.Atoi(key[i+2:])
	if err != nil || p < 0 || strconv.Itoa(p) != key[i+2:] {
		return "", 0, false
	}
	return key[:i], p, true
}

// Group is a group's state as a store read it.
type Group struct {
	Name       string
	Partitions int
	// Members are the live members, ordered by identity.
	Members []Member
	// Leases holds one record per partition, indexed by partition. A
	// partition never acquired has the zero Record but for its Name.
	Leases []Record
}

// Member is a live member of a group.
type Member struct {
	Identity string
	// Remaining is the time left on the member's record as the store
	// measured it.
	Remaining time.Duration
}

// Claim is a partition lease that a member believes it holds, with the
// token it was granted.
type Claim struct {
	Partition int
	Token     int64
}

// Identities lists the live members' identities, ordered.
func (g Group) Identities() []string {
	ids := make([]string, len(g.Members))
	for i, m := range g.Members {
		ids[i] = m.Identity
	}
	return ids
}

// Holds reports whether the group's record of partition p grants it to
// member under token.
func (g Group) Holds(p int, member string, token int64) bool {
	return p >= 0 && p < len(g.Leases) && g.Leases[p].HeldBy(member, token)
}

// SameGroup reports whether a and b have the same live members and the same
// tenure (SameTenure) of every partition.
func SameGroup(a, b Group) bool {
	if a.Partitions != b.Partitions || !slices.Equal(a.Identities(), b.Identities()) ||
		len(a.Leases) != len(b.Leases) {
		return false
	}
	for i := range a.Leases {
		if !SameTenure(a.Leases[i], b.Leases[i]) {
			return false
		}
	}
	return true
}

// CheckJoin validates the arguments of a Join: a group name, a number of
// partitions in 1 … MaxPartitions, and an identity of 1 … MaxIdentityLen
// bytes. Stores call it before writing anything.
func CheckJoin(group string, partitions int, member string) error {
	switch {
	case group == "":
		return Refused(fmt.Errorf("group: empty name"))
	case partitions < 1 || partitions > MaxPartitions:
		return Refused(fmt.Errorf("group %q: %d partitions: must be 1 to %d", group, partitions, MaxPartitions))
	}
	return CheckIdentity(member)
}

// CheckIdentity validates a holder identity: 1 … MaxIdentityLen bytes of
// valid UTF-8 without control characters.
func CheckIdentity(id string) error {
	switch {
	case id == "":
		return Refused(fmt.Errorf("identity: empty"))
	case len(id) > MaxIdentityLen:
		return Refused(fmt.Errorf("identity %.20q…: longer than %d bytes", id, MaxIdentityLen))
	case !printable(id):
		return Refused(fmt.Errorf("identity %q: must be valid UTF-8 without control characters", id))
	}
	return nil
}

// CheckClaims validates claims against a group of n partitions.
func CheckClaims(group string, n int, claims []Claim) error {
	for _, c := range claims {
		if c.Partition < 0 || c.Partition >= n {
			return Refused(fmt.Errorf("group %q: partition %d out of range 0 … %d", group, c.Partition, n-1))
		}
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
