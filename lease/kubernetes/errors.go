package kubernetes

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leaderrun/leaderrun/lease"
)

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

// permanent reports whether no retry can fix err from the API server:
// credentials the server rejects, a missing permission (the server's
// message names the verb and the resource), an object the server finds
// invalid.
func permanent(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// errorPolicy is how the store's errors are reported (lease.ErrorPolicy),
// with the hint for a missing permission naming namespace.
func errorPolicy(namespace string) lease.ErrorPolicy {
	return lease.ErrorPolicy{Permanent: permanent, Hint: func(err error) string {
		switch {
		case apierrors.IsUnauthorized(err):
			return "the server rejects the credentials"
		case apierrors.IsForbidden(err):
			return fmt.Sprintf("leaderrun needs a Role with verbs get, list, watch, create, update on leases in namespace %q; see packaging/kubernetes/rbac.yaml", namespace)
		}
		return ""
	}}
}

// apiError wraps err with context what, marks those errors no retry fixes
// as refused (permanent), and scrubs from its text every credential of
// the store's (credentials): the errors the store returns go through it.
func (s *Store) apiError(what string, err error) error {
	return errorPolicy(s.namespace).Wrap(what, err, s.creds.list())
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
