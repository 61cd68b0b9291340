package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Every Lease leaderrun writes carries these labels and annotations.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "leaderrun"
	labelKind      = "leaderrun/kind" // kindName or kindGroup
	kindName       = "name"
	kindGroup      = "group"

	annName   = "leaderrun/name"   // the leaderrun name or group the Lease is for
	annToken  = "leaderrun/token"  // the fencing token of the last grant
	annHolder = "leaderrun/holder" // the holder of the last grant, also once released
	annState  = "leaderrun/state"  // JSON: the rest of a name's record (nameState)
	annGroup  = "leaderrun/group"  // JSON: a group's members and partitions (groupState)
	// annCandidacy is what candidates said when they campaigned (JSON):
	// on a name's Lease, holder → candidacy; on a group's, partition →
	// holder → candidacy. A leaderrun that does not know it leaves it as
	// it is; a candidate it does not name says nothing (lease.Candidacy's
	// zero value).
	annCandidacy = "leaderrun/candidacy"
)

// leaseName is the Lease object that holds name. A name that is a valid
// object name is the Lease's name itself, so that a client-go elector
// configured with it shares the Lease; any other name (a space, capital
// letters, more than 253 bytes) is turned into one, with a hash of the
// name that keeps apart names that read alike.
func leaseName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return slug(name) + "-" + hash(kindName, name)
}

// groupLeaseName is the Lease object that holds group's members and
// partitions. It never equals a name's Lease but by a hash collision,
// which the name annotation catches.
func groupLeaseName(group string) string {
	return slug(group) + "-group-" + hash(kindGroup, group)
}

// slug keeps the first characters of s that an object name may hold,
// lowercased, others turned into '-'.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		out = "leaderrun"
	}
	return out
}

func hash(kind, s string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + s))
	return hex.EncodeToString(sum[:6])
}
