package redis

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestConformance(t *testing.T) {
	url := serverURL(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		return harness(t, url)
	})
}

// TestListKeepsToItsPrefix lists under a prefix P while a store under
// "P:lease" holds a name: all its keys start with "P:lease:", as P's lease
// records do, yet none is P's.
func TestListKeepsToItsPrefix(t *testing.T) {
	dsn, prefix := newPrefix(t)
	own, nested := openStore(t, dsn), openStore(t, serverURL(t)+"?leaderrun_prefix="+prefix+":lease")
	ctx := testCtx(t)
	if _, err := nested.Acquire(ctx, "n", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redistest.DeletePrefix(serverURL(t), prefix+":lease") })
	if _, err := own.Acquire(ctx, "m", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	recs, err := own.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Name != "m" {
		t.Errorf("List = %+v, want only m", recs)
	}
}
