package lease

import (
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
//
// The zero Record (Token 0) stands for a name that does not exist: tokens
// are never zero.
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

	// Where is what the holder wrote about where it runs
	// (Store.Annotate), for a follower on the same host that may prove
	// the holder dead (see package samehost). Acquisition clears it; stores
	// keep it opaque.
	Where string
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

// HeldBy reports whether the record grants the name to holder under token.
func (r Record) HeldBy(holder string, token int64) bool {
	return r.Held() && r.Holder == holder && r.Token == token
}

// Exists reports whether the record is one a store wrote, not the zero
// Record that stands for an absent name.
func (r Record) Exists() bool { return r.Token != 0 }

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

// SameTenure reports whether a and b describe the same tenure in the same
// state, as far as a waiter cares: the same holder and token, both
// released or neither, both asked to step down or neither, the same Where,
// or both absent. Renewals change none of these.
func SameTenure(a, b Record) bool {
	if !a.Exists() || !b.Exists() {
		return a.Exists() == b.Exists()
	}
	return a.Holder == b.Holder && a.Token == b.Token && a.Released == b.Released &&
		a.StepDown == b.StepDown && a.Where == b.Where
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

// ErrTokenAhead is returned by Forget for a name whose token is not yet
// behind the store's clock in milliseconds: a grant after forgetting it
// could reuse the token. Forgetting it a moment later works.
var ErrTokenAhead = errors.New("its last token is not yet behind the store's clock; try again in a moment")

// ErrAlreadyLeader is returned by RequestStepDown when the successor is
// the current holder.
var ErrAlreadyLeader = errors.New("already the leader")

// ErrLocked marks an Acquire that gave up waiting for a transaction in the
// store that holds the lease locked — in PostgreSQL, a child's transaction
// that called fence and stays open. The election retries it; the name
// cannot change hands until that transaction ends.
var ErrLocked = errors.New("the lease is locked by an open transaction in the store")

// ErrClosed is returned by every method of a closed Store, and by Waits that
// Close ended.
var ErrClosed = errors.New("store closed")

// IfClosed returns ErrClosed once closed is closed, and nil before: the
// check a store makes before each operation, given the channel its Close
// closes.
func IfClosed(closed <-chan struct{}) error {
	select {
	case <-closed:
		return ErrClosed
	default:
		return nil
	}
}

// ErrRefused marks a store error that retrying is not expected to fix: a
// malformed DSN, a missing privilege, a read-only store, a schema it cannot
// use. At startup such an error ends leaderrun (exit 125); once running,
// the election retries it with back-off, because a database that is
// read-only during a switchover comes back.
var ErrRefused = errors.New("store refused")

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
