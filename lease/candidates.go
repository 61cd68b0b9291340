package lease

import (
	"context"
	"time"
)

// CandidateReader is implemented by stores that can tell a holder whether
// anyone else is campaigning for its name: a leader that stops waits for a
// successor only when there is one.
type CandidateReader interface {
	// OtherCandidates reports whether a holder other than holder is a live
	// candidate for name: one whose Acquire of name was refused and is
	// seen until the store's now + 2×ttl (see Store.Acquire). An error
	// means the answer is unknown.
	OtherCandidates(ctx context.Context, name, holder string) (bool, error)
}

// Candidacy is what a replica campaigning for a name says of itself with
// each attempt, for the others to weigh (see Candidate). Its zero value is
// what a leaderrun that does not know it says: priority 0, eligible, no
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
