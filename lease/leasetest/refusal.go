package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
)

// RefusedMidRun checks what a store must do when, once it has answered,
// it starts refusing for a while (a read-only database, a corrupt page):
// e's tenure ends at its renew deadline, a campaign that follows neither
// wins nor gives up while the store refuses, and it wins the name, with a
// larger token, once heal has run. fault makes the store refuse; what
// names it in failures ("the database was read-only").
func RefusedMidRun(t *testing.T, ctx context.Context, e *elect.Elector, what string, fault, heal func()) {
	t.Helper()
	first, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fault()
	select {
	case <-first.Context().Done():
		if cause := context.Cause(first.Context()); !errors.Is(cause, elect.ErrDeadline) {
			t.Errorf("tenure ended with %v, want the renew deadline", cause)
		}
	case <-time.After(time.Minute): // far above the deadline: a loaded machine is slow
		t.Fatalf("the tenure outlived its renew deadline by a minute while %s", what)
	}
	first.Release(ctx)
	won := make(chan *elect.Tenure, 1)
	fail := make(chan error, 1)
	go func() {
		ten, err := e.Campaign(ctx)
		if err != nil {
			fail <- err
			return
		}
		won <- ten
	}()
	select {
	case err := <-fail:
		t.Fatalf("the campaign ended while %s: %v", what, err)
	case ten := <-won:
		t.Fatalf("acquired %+v while %s", ten.Record, what)
	case <-time.After(2 * time.Second):
	}
	heal()
	select {
	case err := <-fail:
		t.Fatalf("Campaign: %v", err)
	case ten := <-won:
		if ten.Token() <= first.Token() {
			t.Errorf("token %d, want > %d", ten.Token(), first.Token())
		}
		ten.Release(ctx)
	case <-time.After(time.Minute):
		t.Fatalf("not acquired within a minute of the store answering again (%s before)", what)
	}
}
