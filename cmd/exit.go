package cmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/replica"
	"github.com/leaderrun/leaderrun/supervise"
)

// Exit codes of leaderrun's own making. Otherwise leaderrun exits with its
// child's code, or dies by (or, as PID 1, exits 128+) the child's signal.
const (
	ExitOK             = 0
	ExitFailure        = 1   // an operator command failed (status of a missing name, …)
	ExitAcquireTimeout = 124 // not acquired within --acquire-timeout, or step-down --wait timed out (as timeout(1))
	ExitUsage          = 125 // bad options, bad configuration, store refused at startup
	ExitNotExecutable  = 126 // the command exists but cannot be executed
	ExitNotFound       = 127 // the command does not exist
)

// usageError marks an error in what the user typed.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// exitCode maps an error returned by a command to leaderrun's exit code. It
// is the one place that policy lives.
func exitCode(err error) int {
	var (
		usage *usageError
		field *config.FieldError
		cfg   *replica.ConfigError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage), errors.As(err, &field), errors.As(err, &cfg), errors.Is(err, lease.ErrRefused),
		errors.Is(err, supervise.ErrNamespace):
		return ExitUsage
	case errors.Is(err, errNoSuchLease), errors.Is(err, lease.ErrNoStore):
		return ExitNoSuchLease
	case errors.Is(err, replica.ErrAcquireTimeout), errors.Is(err, errNoNewLeader):
		return ExitAcquireTimeout
	case errors.Is(err, supervise.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, supervise.ErrNotExecutable):
		return ExitNotExecutable
	case errors.Is(err, context.Canceled):
		return ExitOK
	default:
		return ExitFailure
	}
}
