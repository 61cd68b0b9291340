package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// TestExpiredCandidatesArePruned: every acquire attempt of a name records
// its holder as a candidate and deletes the other candidates of that name
// whose time has passed, so that replicas that come and go (new
// identities at every restart) do not make the table grow without end.
func TestExpiredCandidatesArePruned(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	admin := adminConn(t)
	candidates := pgx.Identifier{schema, candidatesName}.Sanitize()
	count := func() (n int) {
		t.Helper()
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+candidates+" WHERE name = 'n'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := s.Acquire(ctx, "n", "leader", time.Minute); err != nil {
		t.Fatal(err)
	}
	const rounds, perRound, ttl = 4, 20, 300 * time.Millisecond
	for round := range rounds {
		// A new generation of replicas, each seen until now + 2×ttl.
		for i := range perRound {
			_, err := s.Acquire(ctx, "n", fmt.Sprintf("replica-%d-%d", round, i), ttl)
			var held *lease.HeldError
			if !errors.As(err, &held) {
				t.Fatalf("Acquire of a held name = %v, want *lease.HeldError", err)
			}
		}
		// The leader and this generation; the earlier ones were pruned
		// by this generation's attempts.
		if got, want := count(), 1+perRound; got != want {
			t.Fatalf("round %d: %d candidates of the name, want %d (the leader and this round's replicas)", round, got, want)
		}
		time.Sleep(2*ttl + 50*time.Millisecond)
	}
	// One more attempt prunes the last generation.
	if _, err := s.Acquire(ctx, "n", "late", ttl); !errors.As(err, new(*lease.HeldError)) {
		t.Fatalf("Acquire of a held name = %v, want *lease.HeldError", err)
	}
	if got, want := count(), 2; got != want {
		t.Errorf("%d candidates after the last generation expired, want %d (the leader and the late one)", got, want)
	}
}
