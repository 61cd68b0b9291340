package postgres

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestOtherCandidates(t *testing.T) {
	serverDSN(t)
	dsn, _ := newSchema(t)
	leasetest.CheckCandidateReader(t, openStore(t, dsn))
}
