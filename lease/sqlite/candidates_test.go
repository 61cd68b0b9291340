package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestOtherCandidates(t *testing.T) {
	leasetest.CheckCandidateReader(t, openTest(t, filepath.Join(t.TempDir(), "leaderrun.db")))
}
