package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/supervise"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usagef("unexpected argument %q", "x"), ExitUsage},
		{fmt.Errorf("validate: %w", &config.FieldError{Option: "--ttl"}), ExitUsage},
		{fmt.Errorf("open store: %w", lease.ErrRefused), ExitUsage},
		{fmt.Errorf("lease %q: %w", "x", errAcquireTimeout), ExitAcquireTimeout},
		{fmt.Errorf("step-down of %q: %w", "x", errNoNewLeader), ExitAcquireTimeout},
		{fmt.Errorf("lease %q: nobody holds it: %w", "x", errStepDownRefused), ExitFailure},
		{fmt.Errorf("lease %q: %w", "x", errNoSuchLease), ExitNoSuchLease},
		{fmt.Errorf("open store: %w", lease.ErrNoStore), ExitNoSuchLease},
		{fmt.Errorf("start %q: %w", "x", supervise.ErrNotFound), ExitNotFound},
		{fmt.Errorf("start %q: %w", "x", supervise.ErrNotExecutable), ExitNotExecutable},
		{context.Canceled, ExitOK},
		{errors.New("store unreachable"), ExitFailure},
	}
	for _, tc := range tests {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		args, own, command []string
	}{
		{[]string{"leaderrun", "--name", "x", "--", "status", "--json"}, []string{"leaderrun", "--name", "x"}, []string{"status", "--json"}},
		{[]string{"leaderrun", "--name", "x", "--", "a", "--", "b"}, []string{"leaderrun", "--name", "x"}, []string{"a", "--", "b"}},
		{[]string{"leaderrun", "version"}, []string{"leaderrun", "version"}, nil},
		{[]string{"leaderrun", "--name", "x", "--"}, []string{"leaderrun", "--name", "x"}, []string{}},
	}
	for _, tc := range tests {
		own, command := splitCommand(tc.args)
		if !slices.Equal(own, tc.own) || !slices.Equal(command, tc.command) {
			t.Errorf("splitCommand(%q) = %q, %q; want %q, %q", tc.args, own, command, tc.own, tc.command)
		}
	}
}
