package redis

import (
	"errors"
	"fmt"
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

// storeError is an error whose text had passwords scrubbed from it. It
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
// *lease.HeldError) and nil pass through unchanged.
func wrapError(op string, err error, secrets []string) error {
	var held *lease.HeldError
	if err == nil || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotFound) ||
		errors.Is(err, lease.ErrClosed) || errors.As(err, &held) {
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
	return &storeError{msg: scrub(oneLine(msg), secrets), cause: cause}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
