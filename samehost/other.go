//go:build !linux

package samehost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

// ErrUnprovable is wrapped by every error of Prove that says it cannot
// prove the holder dead, rather than that its context ended.
var ErrUnprovable = errors.New("cannot prove the leader dead on this host")

// Prover proves nothing outside Linux: pidfds are Linux's.
type Prover struct {
	Logger *slog.Logger
}

// Prove implements elect.Prover; outside Linux it always fails.
func (p *Prover) Prove(ctx context.Context, rec lease.Record, ending func()) (bool, error) {
	return false, fmt.Errorf("%w: only Linux has pidfds", ErrUnprovable)
}

// EndSignal does nothing outside Linux.
type EndSignal struct{}

// NewEndSignal fails outside Linux.
func NewEndSignal() (*EndSignal, error) {
	return nil, errors.New("end signals are Linux's")
}

// Mark returns w.
func (s *EndSignal) Mark(w Where) Where { return w }

// Watched reports false.
func (s *EndSignal) Watched() bool { return false }

// Send does nothing.
func (s *EndSignal) Send() {}

// Stopping does nothing.
func (s *EndSignal) Stopping() {}

// Here fails outside Linux.
func Here(pid int, start uint64) (Where, error) {
	return Where{}, errors.New("where a process runs is known only on Linux")
}
