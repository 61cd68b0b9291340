package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// permanent reports whether no retry can fix err: the server refused the
// credentials, the user lacks a permission (ACL), the database number does
// not exist, the server is a read-only replica, or it does not know a
// command leaderrun needs. An unreachable server, a timeout, a server that
// is loading, out of memory or short of replicas are not permanent.
func permanent(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "READONLY"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.HasPrefix(msg, "ERR") &&
		(strings.Contains(msg, "DB index") || strings.Contains(msg, "unknown command") ||
			strings.Contains(msg, "AUTH") || strings.Contains(msg, "invalid password"))
}

// hintFor says what to do about a permanent error, where that is not
// obvious from the server's message.
func hintFor(err error) string {
	switch msg := err.Error(); {
	case strings.HasPrefix(msg, "NOPERM"):
		return "the user needs the permissions listed in the lease/redis documentation"
	case strings.HasPrefix(msg, "READONLY"):
		return "the server is a read-only replica; point the DSN at the primary"
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
