package leasetest

import (
	"context"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.CandidateReader = (*Memory)(nil)

// OtherCandidates reports whether a holder other than holder is a live
// candidate for name.
func (m *Memory) OtherCandidates(ctx context.Context, name, holder string) (bool, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	now := time.Now()
	for h, until := range d.candidates[name] {
		if h != holder && now.Before(until) {
			return true, nil
		}
	}
	return false, nil
}
