package lease

import (
	"maps"
	"slices"
	"time"
)

// The lease rules, written once: what each operation of a Store does to a
// name's record, as pure functions of the record the store read, the
// store's now and the operation's arguments. A store that reads and then
// writes with a compare-and-swap (leasetest's in-memory store, etcd,
// Kubernetes) calls them between its read and its write; a store that
// applies a rule in one statement (the SQL stores, Redis's scripts) is
// checked against them by leasetest's model-based tests.
//
// A record passed in is the one the store read, measured at now:
// Remaining and Reserved are what is left of the lease and of the
// step-down reservation at now, and the zero Record stands for an absent
// name. A record returned is the one to write, measured at now too: a
// grant's Remaining is its ttl, a step-down's Reserved its window;
// Acquired, Renewed and Expires are set from now where the rule changes
// them.

// NextToken is the token rule: a grant's token is the previous one + 1 or
// the store's clock in milliseconds, whichever is greater (prev is 0 for a
// name never granted, or whose record was lost). The clock keeps tokens
// growing when a record is deleted, restored from a backup or lost with an
// asynchronous replica; the previous token, when the clock has not moved
// on since (two grants in one millisecond) or is behind it (a record
// written by a clock ahead).
func NextToken(prev int64, now time.Time) int64 {
	return max(prev+1, now.UnixMilli())
}

// GrantWait is how long cur keeps holder from a grant: Blocks, except that
// for a Seize (dead, the tenure proved dead, not nil) a record that still
// names dead's holder and token, unreleased, counts as expired, so that
// only a step-down reservation keeps holder out. Zero or negative: holder
// may have the name now.
func GrantWait(cur Record, holder string, dead *Record) time.Duration {
	if dead != nil && cur.Exists() && !cur.Released && cur.Holder == dead.Holder && cur.Token == dead.Token {
		cur.Remaining = 0
	}
	return cur.Blocks(holder)
}

// Grant is the rule of Acquire (dead nil) and Seize (dead, the tenure
// proved dead): when cur lets holder in (GrantWait), name is granted to
// holder as a new tenure with the next token (NextToken), until now +
// ttl, without a step-down request, a reservation or a Where. Otherwise it
// returns the refusal (Refusal), and the store records holder as a
// candidate (Seen).
func Grant(cur Record, name, holder string, dead *Record, ttl time.Duration, now time.Time) (Record, error) {
	if err := Refusal(cur, holder, dead); err != nil {
		return Record{}, err
	}
	return Record{Name: name, Holder: holder, Token: NextToken(cur.Token, now),
		Acquired: now, Renewed: now, Expires: now.Add(ttl), Remaining: ttl}, nil
}

// Renew is the rule of Renew: a tenure that holder holds with token at now
// (Record.HeldBy) lasts until now + ttl; its token, step-down request and
// reservation stay. Otherwise it returns ErrLost.
func Renew(cur Record, holder string, token int64, ttl time.Duration, now time.Time) (Record, error) {
	if !cur.HeldBy(holder, token) {
		return Record{}, ErrLost
	}
	cur.Renewed, cur.Expires, cur.Remaining = now, now.Add(ttl), ttl
	return cur, nil
}

// Annotate is the rule of Annotate: the tenure that holder holds with
// token gets where as its Where; otherwise ErrLost.
func Annotate(cur Record, holder string, token int64, where string) (Record, error) {
	if !cur.HeldBy(holder, token) {
		return Record{}, ErrLost
	}
	cur.Where = where
	return cur, nil
}

// Release is the rule of Release: the tenure that holder holds with token
// is released, its reservation kept; otherwise ErrLost (also when it
// expired untaken: the record does not change then).
func Release(cur Record, holder string, token int64) (Record, error) {
	if !cur.HeldBy(holder, token) {
		return Record{}, ErrLost
	}
	cur.Released = true
	return cur, nil
}

// StepDown is the rule of RequestStepDown: a held record, whose holder is
// not successor, gets the step-down flag and a reservation of window, for
// successor or, without one, against its holder. live reports whether
// successor is a live successor for the name (LiveSuccessor); it is asked
// only for a successor, and only when the rest allows the request.
// Otherwise it returns the refusal (StepDownRefusal).
func StepDown(cur Record, successor string, window time.Duration, live func() bool) (Record, error) {
	if !cur.Held() || successor == cur.Holder || (successor != "" && !live()) {
		return Record{}, StepDownRefusal(cur, cur.Exists(), successor)
	}
	cur.StepDown = true
	cur.Successor, cur.Excluded = successor, ""
	if successor == "" {
		cur.Excluded = cur.Holder
	}
	cur.Reserved = window
	return cur, nil
}

// Candidate is a holder whose Acquire or Seize of a name was refused: it
// campaigns for the name, and a step-down may name it successor, until
// SeenUntil by the store's clock. It carries what the holder said of
// itself (Candidacy); a candidate recorded by a leaderrun that does not
// know those attributes has their zero values: priority 0, eligible.
type Candidate struct {
	Holder    string
	SeenUntil time.Time

	Priority int32 // see Candidacy
	Preempt  bool  // see Candidacy
	// IneligibleUntil is when, by the store's clock, the candidate may be
	// preferred again (see Candidacy.Ineligible); zero for eligible.
	IneligibleUntil time.Time
	Note            string // see Candidacy
}

// Eligible reports whether c may be preferred at now: its ineligibility,
// if any, has ended.
func (c Candidate) Eligible(now time.Time) bool { return !now.Before(c.IneligibleUntil) }

// Campaign is the rule of Campaigner.Campaign: holder's candidate record,
// whatever it was, becomes c, seen until now + 2×ttl, ineligible until
// now + c.Ineligible when that is positive.
func Campaign(holder string, c Candidacy, ttl time.Duration, now time.Time) Candidate {
	next := Seen(holder, ttl, now)
	next.Priority, next.Preempt, next.Note = c.Priority, c.Preempt, c.Note
	if c.Ineligible > 0 {
		next.IneligibleUntil = now.Add(c.Ineligible)
	}
	return next
}

// SeeAgain is the candidate a refused Acquire or Seize by prev's holder
// at now leaves: prev, seen until now + 2×ttl, with what it said (a
// store may keep prev instead while it is Fresh). A candidate no longer
// Live may be gone already, and what it said with it (stores prune
// them): the refusal then records Seen.
func SeeAgain(prev Candidate, ttl time.Duration, now time.Time) Candidate {
	prev.SeenUntil = now.Add(2 * ttl)
	return prev
}

// Standing is c as Candidates reports it at now.
func (c Candidate) Standing(now time.Time) Standing {
	s := Standing{Holder: c.Holder, Seen: c.SeenUntil.Sub(now),
		Candidacy: Candidacy{Priority: c.Priority, Preempt: c.Preempt, Note: c.Note}}
	if left := c.IneligibleUntil.Sub(now); !c.IneligibleUntil.IsZero() && left > 0 {
		s.Ineligible = left
	}
	return s
}

// Forgettable is the rule of Forget at now: a name may be forgotten unless
// it is held (a *HeldError naming the holder) or its token is not yet
// behind the store's clock in milliseconds (ErrTokenAhead): the next
// grant's token, from the clock alone once the record is gone, must still
// exceed it.
func Forgettable(cur Record, now time.Time) error {
	switch {
	case cur.Held():
		return &HeldError{Record: cur}
	case cur.Token >= now.UnixMilli():
		return ErrTokenAhead
	}
	return nil
}

// Seen is the candidate a refused Acquire or Seize by holder at now
// records: seen until now + 2×ttl. A store may record a granted holder as
// well, and may keep a candidate that is still Fresh instead of writing it
// again.
func Seen(holder string, ttl time.Duration, now time.Time) Candidate {
	return Candidate{Holder: holder, SeenUntil: now.Add(2 * ttl)}
}

// Live reports whether c still campaigns at now.
func (c Candidate) Live(now time.Time) bool { return now.Before(c.SeenUntil) }

// Fresh reports whether c is still seen for more than ttl after now: a
// store may leave it as it is rather than write Seen again, sparing a
// write per refusal of a follower that retries often.
func (c Candidate) Fresh(ttl time.Duration, now time.Time) bool {
	return c.SeenUntil.After(now.Add(ttl))
}

// LiveSuccessor reports whether a step-down of name may name successor at
// now: successor is a live candidate for name (cand, its candidate record,
// the zero Candidate if it has none), or name is a partition
// (SplitPartitionKey) and successor a member of its group whose membership
// lasts until memberUntil (zero if it is none). For any other name,
// membership plays no part.
func LiveSuccessor(name string, cand Candidate, memberUntil, now time.Time) bool {
	if cand.Live(now) {
		return true
	}
	_, _, ok := SplitPartitionKey(name)
	return ok && now.Before(memberUntil)
}

// JoinPartitions is the rule of a Join's number of partitions: the first
// Join of group (have is 0) fixes it at want; a later Join must ask for
// the number fixed, else it changes nothing and returns a
// *PartitionsError.
func JoinPartitions(group string, have, want int) (int, error) {
	if have != 0 && have != want {
		return have, &PartitionsError{Group: group, Have: have, Want: want}
	}
	return want, nil
}

// KeepMember is the rule of a member's record in Join and RenewMember: the
// member, whose membership lasted until until (zero: none), is a member
// until now + ttl. added reports that this adds a member (a new one, or
// one that expired or left), which wakes the group's waiters. A member
// that leaves is deleted; the live members are those whose membership
// lasts past now (LiveMembers). RenewMember renews each claimed partition
// by the rule of Renew.
func KeepMember(until time.Time, ttl time.Duration, now time.Time) (next time.Time, added bool) {
	return now.Add(ttl), !now.Before(until)
}

// LiveMembers lists the members whose membership, until[identity], lasts
// past now, ordered by identity, with their time left: a Group's Members.
func LiveMembers(until map[string]time.Time, now time.Time) []Member {
	var out []Member
	for _, id := range slices.Sorted(maps.Keys(until)) {
		if left := until[id].Sub(now); left > 0 {
			out = append(out, Member{Identity: id, Remaining: left})
		}
	}
	return out
}
