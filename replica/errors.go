package replica

import (
	"errors"
	"fmt"

	"github.com/leaderrun/leaderrun/supervise"
)

// Exit carries the command's final status out of Run, so that the caller
// can exit with it or re-raise its signal.
type Exit struct{ Status supervise.Status }

func (e *Exit) Error() string { return "child " + e.Status.String() }

// ErrAcquireTimeout ends a campaign that ran out of --acquire-timeout.
var ErrAcquireTimeout = errors.New("lease not acquired within --acquire-timeout")

// ConfigError marks a configuration that the store shows cannot run (a
// name run in the other mode): the operator must change it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// The status of a tenure whose command did not start, as a shell gives it.
const (
	codeNotExecutable = 126 // the command exists but cannot be executed
	codeNotFound      = 127 // the command does not exist
)
