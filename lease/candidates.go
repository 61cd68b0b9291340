package lease

import (
	"context"
	"slices"
	"time"
)

// Campaigner is the part of Store that keeps candidacies: the candidates a
// store records for a name (see Store.Acquire) with what each says of
// itself, and the ways a replica or an operator ends a candidacy or a
// name. package leasetest checks it.
type Campaigner interface {
	// Campaign records holder as a candidate for name with c, seen until
	// the store's now + 2×ttl and, when c.Ineligible > 0, ineligible
	// until the store's now + c.Ineligible (Campaign, the rule). It
	// writes holder's candidacy whether or not name is free or holder
	// holds it, replacing what holder said before, and changes no lease.
	// A refused Acquire or Seize afterwards extends how long holder is
	// seen and keeps what it said.
	Campaign(ctx context.Context, name, holder string, c Candidacy, ttl time.Duration) error

	// Candidates returns name's live candidates (Candidate.Live) ordered
	// by holder, each measured at the store's now: a candidate recorded
	// by a refused Acquire alone, as by a leaderrun that does not know
	// Campaign, reads as the zero Candidacy.
	Candidates(ctx context.Context, name string) ([]Standing, error)

	// Withdraw ends holder's candidacy for name at once; a replica that
	// stops cleanly calls it, so that a step-down does not count on it.
	// Withdrawing a holder that is no candidate does nothing.
	Withdraw(ctx context.Context, name, holder string) error

	// Forget deletes name's record and its candidates when name is not
	// held (Forgettable): released, or expired. It returns ErrNotFound
	// for a name with no record, and a *HeldError, changing nothing, for
	// a held one. The next grant's token still exceeds the forgotten
	// ones (NextToken's clock).
	Forget(ctx context.Context, name string) error
}

// Candidacy is what a replica campaigning for a name says of itself
// (Campaigner.Campaign), for the others to weigh. Its zero value is what a
// leaderrun that does not know it says: priority 0, eligible, no
// preemption, no note.
type Candidacy struct {
	// Priority orders candidates: higher leads. On a free name a candidate
	// defers, for a bounded time, to a live eligible one of higher
	// priority; a holder is not made to hand over for one unless that one
	// asks to preempt.
	Priority int32
	// Preempt asks the holder of lower priority to hand the name over
	// once this candidate has campaigned for its preempt delay.
	Preempt bool
	// Ineligible is how long, from the store's now, the candidate is not
	// to be preferred: a replica that handed the name over because its
	// command was unhealthy, for its cooldown. Zero or negative: eligible.
	Ineligible time.Duration
	// Note says why it is ineligible, for operators (status, watch): at
	// most MaxNote bytes, which the replica bounds and escapes.
	Note string
}

// MaxNote bounds Candidacy.Note.
const MaxNote = 256

// Standing is a live candidate as Candidates reads it at the store's now:
// its Candidacy's Ineligible is what is left of its ineligibility (zero
// once eligible), and Seen how long it is still seen without campaigning
// again.
type Standing struct {
	Holder string
	Seen   time.Duration
	Candidacy
}

// Eligible reports whether s may be preferred.
func (s Standing) Eligible() bool { return s.Ineligible <= 0 }

// Others returns the candidates in list other than holder.
func Others(list []Standing, holder string) []Standing {
	return slices.DeleteFunc(slices.Clone(list), func(s Standing) bool { return s.Holder == holder })
}

// Precedes reports whether a candidate a is preferred over b for a free
// name: an eligible candidate over an ineligible one, then the higher
// priority. Equal ones precede neither.
func Precedes(a, b Candidacy) bool {
	ae, be := a.Ineligible <= 0, b.Ineligible <= 0
	if ae != be {
		return ae
	}
	return a.Priority > b.Priority
}
