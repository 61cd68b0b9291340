package lease

import "context"

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
