package etcd

import (
	"errors"

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

// errorPolicy is how this store's errors are reported (lease.ErrorPolicy).
var errorPolicy = lease.ErrorPolicy{Permanent: permanent, Hint: hintFor}

// wrapError adds op as context to err, marks it lease.ErrRefused when no
// retry can fix it, and scrubs secrets from its text (lease.ErrorPolicy.Wrap).
func wrapError(op string, err error, secrets []string) error {
	return errorPolicy.Wrap(op, err, secrets)
}
