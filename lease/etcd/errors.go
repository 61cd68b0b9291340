package etcd

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/leaderrun/leaderrun/lease"
)

// permanent reports whether no retry can fix err: etcd refused the user or
// password, the user's role lacks a permission on leaderrun's keys, the
// cluster is out of space (an alarm an administrator must clear), or it
// refuses a transaction as too large for its limits.
func permanent(err error) bool {
	for _, e := range []error{
		rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty,
		rpctypes.ErrUserNotFound, rpctypes.ErrRoleNotGranted, rpctypes.ErrPermissionNotGranted,
		rpctypes.ErrNoSpace, rpctypes.ErrTooManyOps, rpctypes.ErrRequestTooLarge,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// hintFor says what to do about a permanent error, where the server's
// message does not.
func hintFor(err error) string {
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return "the user's role needs readwrite permission on the store's key prefix, see the lease/etcd documentation"
	case errors.Is(err, rpctypes.ErrNoSpace):
		return "etcd raised its NOSPACE alarm: compact, defragment and disarm it"
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return "etcd's --max-txn-ops is below the 128 leaderrun needs"
	}
	return ""
}

// storeError is an error whose text had secrets scrubbed from it. It
// unwraps to the original error (and to lease.ErrRefused when permanent).
type storeError struct {
	msg   string
	cause []error
}

func (e *storeError) Error() string   { return e.msg }
func (e *storeError) Unwrap() []error { return e.cause }

// wrapError adds op as context to err, marks it lease.ErrRefused when no
// retry can fix it, and scrubs secrets from its text. Sentinels the caller
// branches on (lease.ErrLost, lease.ErrNotFound, lease.ErrClosed,
// *lease.HeldError, the step-down refusals) and nil pass through unchanged.
func wrapError(op string, err error, secrets []string) error {
	var held *lease.HeldError
	switch {
	case err == nil, errors.As(err, &held):
		return err
	case errors.Is(err, lease.ErrLost), errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNotHeld),
		errors.Is(err, lease.ErrUnknownSuccessor), errors.Is(err, lease.ErrAlreadyLeader):
		return err
	}
	msg := fmt.Sprintf("%s: %v", op, err)
	cause := []error{err}
	if permanent(err) || errors.Is(err, lease.ErrRefused) {
		if hint := hintFor(err); hint != "" {
			msg += " (" + hint + ")"
		}
		if !errors.Is(err, lease.ErrRefused) {
			msg += ": " + lease.ErrRefused.Error()
			cause = append(cause, lease.ErrRefused)
		}
	}
	return &storeError{msg: scrub(strings.Join(strings.Fields(msg), " "), secrets), cause: cause}
}

// scrub removes every secret from msg.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
