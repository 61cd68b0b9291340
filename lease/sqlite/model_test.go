package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// on virtual clocks: a handle reads a clock of the test's instead of the
// host's, under a boot id of its own.
func TestModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			s, err := Open(ctx(t), path, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			clock := leasetest.NewVirtualClock()
			s.clock = hostClock{bootID: "model-test", virtual: clock.Read}
			return leasetest.ModelStore{Store: s, Clock: clock, Plant: func(t *testing.T, rec lease.Record) {
				released := 0
				if rec.Released {
					released = 1
				}
				ms := rec.Expires.UnixMilli()
				if _, err := rawDB(t, path).Exec(`INSERT OR REPLACE INTO leases (`+columns+`)
					VALUES (?, ?, ?, 'model-test', ?, ?, ?, ?, 0, '', '', 0, '')`,
					rec.Name, rec.Holder, rec.Token, ms-1000, ms-1000, ms, released); err != nil {
					t.Fatalf("plant %q: %v", rec.Name, err)
				}
			}}
		},
		KeepsFresh: true,
		// Under the race detector SQLite itself (pure Go) runs several
		// times slower: 300 sequences took 75 s on a loaded machine.
		RaceSequences: 100,
	})
}
