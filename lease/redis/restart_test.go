package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/lease"
)

// TestRestartEmptyMidTenure restarts a private server, with nothing
// persisted, while a leader holds a name: the leader's next renewal must
// report the lease lost (not renewed, not an endless error), its tenure
// must end with ErrLost before its renew deadline, and the next tenure's
// token must still be greater — the counter is gone with everything else,
// so it comes from the server's clock alone.
func TestRestartEmptyMidTenure(t *testing.T) {
	srv := redistest.StartServer(t)
	a, b := openStore(t, srv.URL()), openStore(t, srv.URL())
	var (
		mu     sync.Mutex
		renews []error
	)
	leader := &elect.Elector{
		Store: a, Name: "n", Holder: "a",
		LeaseDuration: 20 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond,
		Observe: func(op string, _ time.Duration, err error) {
			if op == "renew" {
				mu.Lock()
				defer mu.Unlock()
				renews = append(renews, err)
			}
		},
	}
	tenure, err := leader.Campaign(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	first := tenure.Token()

	restarted := time.Now()
	srv.Restart()
	select {
	case <-tenure.Context().Done():
	case <-time.After(leader.RenewDeadline):
		t.Fatal("the tenure outlived its renew deadline after the server restarted empty")
	}
	if cause := context.Cause(tenure.Context()); !errors.Is(cause, lease.ErrLost) {
		t.Errorf("tenure ended with %v, want ErrLost (the renewal found the record gone)", cause)
	}
	mu.Lock()
	var failed int
	for _, err := range renews {
		if err != nil && !errors.Is(err, lease.ErrLost) {
			failed++
		}
	}
	t.Logf("tenure ended %v after the restart; %d renewals in all, %d failed with a connection error before ErrLost",
		time.Since(restarted).Round(time.Millisecond), len(renews), failed)
	mu.Unlock()

	next, err := b.Acquire(testCtx(t), "n", "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the restart: %v", err)
	}
	if next.Token <= first {
		t.Errorf("token after the empty restart = %d, want > %d", next.Token, first)
	}
	t.Logf("tokens: %d before the restart, %d after (the clock floor)", first, next.Token)
}
