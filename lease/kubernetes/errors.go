package kubernetes

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leaderrun/leaderrun/lease"
)

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

// apiError wraps err from the API server with context what, marking those
// no retry fixes as refused: credentials the server rejects, a missing
// permission (the server's message names the verb and the resource), a
// namespace that does not exist, an object the server finds invalid.
func (s *Store) apiError(what string, err error) error {
	if what != "" {
		err = fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case apierrors.IsUnauthorized(err):
		return lease.Refused(fmt.Errorf("%w (the server rejects the credentials)", err))
	case apierrors.IsForbidden(err):
		return lease.Refused(fmt.Errorf("%w (leaderrun needs a Role with verbs get, list, watch, create, update on leases in namespace %q; see packaging/kubernetes/rbac.yaml)", err, s.namespace))
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return lease.Refused(err)
	}
	return err
}

// errNoNamespace is the error of a create that the server answered with
// NotFound: the namespace does not exist.
func errNoNamespace(ns string, err error) error {
	return fmt.Errorf("namespace %q does not exist (create it, or name another in k8s://NAMESPACE): %w", ns, err)
}

// errConflicts is the error of an operation whose writes kept meeting
// others'.
func errConflicts(name string) error {
	return fmt.Errorf("lease %q: %d writes in a row met another's: gave up", name, maxConflicts)
}
