package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.CandidateReader = (*Store)(nil)

// OtherCandidates reports whether a holder other than holder is a live
// candidate for name, by the database's clock.
func (s *Store) OtherCandidates(ctx context.Context, name, holder string) (bool, error) {
	q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE name = $1 AND holder <> $2 AND seen_until > now())`, s.candidates)
	var found bool
	err := s.do(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, q, name, holder).Scan(&found)
	})
	return found, s.wrap(fmt.Sprintf("read candidates for %q", name), err)
}
