package lease

import (
	"errors"
	"fmt"
)

// The policy every store shares, so that each store only persists.

// Refusal is what Acquire (dead nil) and Seize (dead, the tenure proved
// dead) return when the current record cur does not let holder take the
// name: a *HeldError whose Record.Remaining is the time until it may
// (GrantWait). It returns nil when cur does let holder take it (the name
// became free after the store's grant was refused, and the store should
// try again).
func Refusal(cur Record, holder string, dead *Record) error {
	wait := GrantWait(cur, holder, dead)
	if wait <= 0 {
		return nil
	}
	cur.Remaining = wait
	return &HeldError{Record: cur}
}

// StepDownRefusal explains why a RequestStepDown of successor changed
// nothing, given the record cur read afterwards (found false: there is no
// record): ErrNotFound, ErrNotHeld, ErrAlreadyLeader or
// ErrUnknownSuccessor.
func StepDownRefusal(cur Record, found bool, successor string) error {
	switch {
	case !found:
		return ErrNotFound
	case !cur.Held():
		return ErrNotHeld
	case successor != "" && cur.Holder == successor:
		return ErrAlreadyLeader
	default:
		return ErrUnknownSuccessor
	}
}

// Refused marks err as one that retrying is not expected to fix: the result
// matches both err and ErrRefused with errors.Is, and reads as err.
func Refused(err error) error {
	if err == nil || errors.Is(err, ErrRefused) {
		return err
	}
	return &refusedError{err}
}

type refusedError struct{ err error }

func (e *refusedError) Error() string   { return e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{e.err, ErrRefused} }

// ErrPartitions marks a group whose store records another number of
// partitions (see PartitionsError).
var ErrPartitions = errors.New("partition count mismatch")

// PartitionsError is returned by Join when the group was created with
// another number of partitions. It wraps ErrRefused and ErrPartitions.
type PartitionsError struct {
	Group string
	Have  int // recorded in the store
	Want  int // asked for
}

func (e *PartitionsError) Error() string {
	return fmt.Sprintf("group %q has %d partitions in the store, not %d: every replica of a group must use the same --partitions (to change it, stop every replica and use a new --name)",
		e.Group, e.Have, e.Want)
}

func (e *PartitionsError) Unwrap() []error { return []error{ErrRefused, ErrPartitions} }
