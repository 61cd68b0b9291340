package sqlite

import (
	"context"
	"fmt"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.CandidateReader = (*Store)(nil)

// otherCandidatesSQL counts the live candidates for name ?1 other than
// holder ?2 at store time ?4 under boot id ?3.
const otherCandidatesSQL = `SELECT count(*) FROM candidates
WHERE name = ?1 AND holder <> ?2 AND boot_id = ?3 AND seen_ms > ?4`

// OtherCandidates reports whether a holder other than holder is a live
// candidate for name.
func (s *Store) OtherCandidates(ctx context.Context, name, holder string) (bool, error) {
	op := fmt.Sprintf("read candidates for %q", name)
	if err := s.fresh(ctx); err != nil {
		return false, s.fail(op, err)
	}
	if err := lease.IfClosed(s.closed); err != nil {
		return false, s.fail(op, err)
	}
	now, err := s.clock.now()
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	err = retryBusy(ctx, busyTimeout, func() error {
		return s.db().QueryRowContext(ctx, otherCandidatesSQL, name, holder, s.clock.bootID, now.millis()).Scan(&n)
	})
	if err != nil {
		return false, s.fail(op, err)
	}
	return n > 0, nil
}
