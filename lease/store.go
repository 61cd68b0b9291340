package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Record is the state of one name as a store last wrote it.
//
// Acquired, Renewed and Expires are wall-clock readings for display; a store
// whose own clock is not the wall clock (SQLite uses the host's monotonic
// clock) converts them at read time. Remaining is the time left on the lease
// as the store measured it when it produced the record; it is what a
// follower sleeps on, because it does not depend on the local wall clock.
type Record struct {
	Name     string
	Holder   string
	Token    int64
	Acquired time.Time
	Renewed  time.Time
	Expires  time.Time
	// Remaining is zero or negative once the lease has expired.
	Remaining time.Duration
	// Released reports that the last holder handed the name back.
	Released bool
}

// State says whether a record is held, released or expired.
func (r Record) State() string {
	switch {
	case r.Released:
		return "released"
	case r.Remaining <= 0:
		return "expired"
	default:
		return "held"
	}
}

// Held reports whether the record grants the name to its holder now.
func (r Record) Held() bool { return !r.Released && r.Remaining > 0 }

// ErrLost is returned by Renew and Release when holder no longer holds the
// name with that token: it expired, was released, or another holder took it.
var ErrLost = errors.New("lease lost")

// ErrNotFound is returned by Get for a name that has never been acquired.
var ErrNotFound = errors.New("no such lease")

// HeldError is returned by Acquire when another holder has the name.
type HeldError struct {
	Record Record
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %q is held by %s (token %d) for another %s",
		e.Record.Name, e.Record.Holder, e.Record.Token, e.Record.Remaining.Round(time.Millisecond))
}

// Store persists leases. Every method is one atomic operation evaluated with
// the store's own clock; implementations never read, decide and then write
// in separate steps. Methods are safe for concurrent use.
//
// An operation whose outcome is unknown (a timeout, a dropped connection)
// must be reported as an error, never as success: the election loop treats
// any error from Renew as "not renewed".
type Store interface {
	// Acquire grants name to holder for ttl if the name is free: never
	// acquired, released, or expired by the store's clock. The returned
	// record carries the new token, which is greater than every token
	// previously granted for name, also when the record was deleted
	// (token = max(previous+1, store clock in milliseconds)). If another
	// holder has the name, Acquire returns a *HeldError describing it.
	// Acquire by the current holder while it holds the name also returns
	// *HeldError: a tenure is renewed, never re-acquired.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Record, error)

	// Renew extends holder's lease on name to ttl from the store's now, if
	// holder still holds it with token and it has not expired. Otherwise it
	// returns ErrLost. The token does not change.
	Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (Record, error)

	// Release marks name free if holder holds it with token, and wakes
	// followers blocked in Wait. It returns ErrLost if holder no longer
	// held it (the name is not changed then).
	Release(ctx context.Context, name, holder string, token int64) error

	// Get returns the record for name, or ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)

	// List returns every record in the store, ordered by name.
	List(ctx context.Context) ([]Record, error)

	// Wait blocks until name may have changed hands (a release, a new
	// holder, a deletion), until timeout has passed, or until ctx ends,
	// whichever is first. It returns nil in the first two cases and
	// ctx's error in the last. Spurious wake-ups are allowed; renewals
	// by the same holder should not wake it. A store that cannot be
	// notified polls a cheap read.
	Wait(ctx context.Context, name string, timeout time.Duration) error

	// Describe names the store for logs and status output. It never
	// contains a password.
	Describe() string

	// Close releases the store's resources. It does not release leases.
	Close() error
}
