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

	// StepDown reports that an operator asked the holder of this tenure to
	// hand the name over (Store.RequestStepDown). Acquisition clears it.
	StepDown bool
	// Successor, when set, is the only holder that may acquire the name
	// while the step-down reservation lasts (Reserved > 0).
	Successor string
	// Excluded, when set, is the holder that stepped down without naming
	// a successor; it may not acquire the name while the reservation
	// lasts, so that another replica takes it.
	Excluded string
	// Reserved is the time left on the step-down reservation as the store
	// measured it when it produced the record; zero or negative when there
	// is none. Release keeps the reservation; acquisition clears it.
	Reserved time.Duration
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

// Blocks reports how long holder must wait, as of the record, before it may
// acquire the name: the lease's time left while it is held, and at least
// the reservation's while a step-down reservation keeps holder out. Zero
// or negative means holder may acquire it now.
func (r Record) Blocks(holder string) time.Duration {
	var d time.Duration
	if r.Held() {
		d = r.Remaining
	}
	if r.Reserved > 0 && r.reservedAgainst(holder) {
		d = max(d, r.Reserved)
	}
	return d
}

func (r Record) reservedAgainst(holder string) bool {
	if r.Successor != "" {
		return holder != r.Successor
	}
	return r.Excluded != "" && holder == r.Excluded
}

// ErrLost is returned by Renew and Release when holder no longer holds the
// name with that token: it expired, was released, or another holder took it.
var ErrLost = errors.New("lease lost")

// ErrNotFound is returned by Get for a name that has never been acquired.
var ErrNotFound = errors.New("no such lease")

// ErrNotHeld is returned by RequestStepDown for a name that nobody holds:
// it was released or has expired.
var ErrNotHeld = errors.New("lease not held")

// ErrUnknownSuccessor is returned by RequestStepDown for a successor that
// is not campaigning for the name: it has not tried to acquire the name
// within twice its lease duration.
var ErrUnknownSuccessor = errors.New("no replica with that identity is campaigning for the name")

// ErrAlreadyLeader is returned by RequestStepDown when the successor is
// the current holder.
var ErrAlreadyLeader = errors.New("already the leader")

// HeldError is returned by Acquire when the name is not free for the
// caller: another holder has it, or a step-down reservation keeps the
// caller out. Record.Remaining is then the time until the name may become
// free for the caller (Record.Blocks), so that it can sleep until then.
type HeldError struct {
	Record Record
}

func (e *HeldError) Error() string {
	r := e.Record
	state := "held"
	if r.Released {
		state = "released"
	}
	msg := fmt.Sprintf("lease %q is %s by %s (token %d)", r.Name, state, r.Holder, r.Token)
	switch {
	case r.Reserved <= 0:
	case r.Successor != "":
		msg += fmt.Sprintf(", reserved for %s after a step-down,", r.Successor)
	case r.Excluded != "":
		msg += fmt.Sprintf(", closed to %s after its step-down,", r.Excluded)
	}
	return msg + fmt.Sprintf(" for another %s", r.Remaining.Round(time.Millisecond))
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
	// acquired, released, or expired by the store's clock, and not kept
	// from holder by a step-down reservation (see RequestStepDown). The
	// returned record carries the new token, which is greater than every
	// token previously granted for name, also when the record was deleted
	// (token = max(previous+1, store clock in milliseconds)); acquisition
	// clears the step-down flag and the reservation. If the name is not
	// free for holder, Acquire returns a *HeldError describing it, whose
	// Record.Remaining is the time until it may be. Acquire by the current
	// holder while it holds the name also returns *HeldError: a tenure is
	// renewed, never re-acquired.
	//
	// An Acquire that is refused records holder as a candidate for name,
	// seen until the store's now + 2×ttl; RequestStepDown accepts only a
	// live candidate as successor. (A store may record it on every
	// attempt.)
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Record, error)

	// Renew extends holder's lease on name to ttl from the store's now, if
	// holder still holds it with token and it has not expired. Otherwise it
	// returns ErrLost. The token does not change. A renewal of a tenure
	// asked to step down succeeds and returns a record with StepDown set;
	// ending the tenure is the caller's decision.
	Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (Record, error)

	// Release marks name free if holder holds it with token, and wakes
	// followers blocked in Wait. It returns ErrLost if holder no longer
	// held it (the name is not changed then). A step-down reservation
	// outlives the release.
	Release(ctx context.Context, name, holder string, token int64) error

	// RequestStepDown asks the current holder of name to hand it over:
	// it sets the record's StepDown flag, which the holder's next Renew
	// returns, and reserves the name for window from the store's now.
	// With a successor, only successor may acquire the name during the
	// window; without one, the current holder may not. After the window
	// anyone may. It wakes waiters, and returns the updated record.
	//
	// It changes nothing and returns ErrNotFound for a name never
	// acquired, ErrNotHeld for one released or expired, ErrAlreadyLeader
	// when successor holds the name, and ErrUnknownSuccessor when
	// successor is not a live candidate (see Acquire). It is one atomic
	// operation: the checks and the write cannot be separated by another
	// holder's acquisition.
	RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (Record, error)

	// Get returns the record for name, or ErrNotFound.
	Get(ctx context.Context, name string) (Record, error)

	// List returns every record in the store, ordered by name.
	List(ctx context.Context) ([]Record, error)

	// Wait blocks until name may have changed hands (a release, a new
	// holder, a deletion) or a step-down was requested, until timeout has
	// passed, or until ctx ends, whichever is first. It returns nil in the
	// first two cases and ctx's error in the last. Spurious wake-ups are allowed; renewals
	// by the same holder should not wake it. A store that cannot be
	// notified polls a cheap read.
	Wait(ctx context.Context, name string, timeout time.Duration) error

	// Describe names the store for logs and status output. It never
	// contains a password.
	Describe() string

	// Close releases the store's resources. It does not release leases.
	Close() error
}
