package supervise

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// A prepared start takes the PID namespace's cost off the moment a
// command must start. Prepare does all that Start does with a namespace
// (the cgroup, the init's fork and exec, its handshake, its /proc) ahead
// of time, and the init then waits; Prepared.Start gives it the word and
// the command's environment, and the init forks the command at once. A
// standby prepares while it waits for the name, so that taking it over
// costs what a start without a namespace costs.

// ErrPreparedGone means a prepared start can no longer be used: it was
// used or closed, or its init died. Start the command anew.
var ErrPreparedGone = errors.New("the prepared start is gone")

// Prepared is a command's start made ahead, waiting for Start.
type Prepared struct {
	c    *Child
	path string
	used bool // by Start or Close
}

// Prepare makes spec's start ready, in a PID namespace (spec.Namespace
// must not be NoNamespace); nothing of the command runs until Start. The
// Spec's Env is not the command's: Start gives that.
func Prepare(spec Spec) (*Prepared, error) {
	if spec.Namespace == NoNamespace {
		return nil, fmt.Errorf("prepare %q: a prepared start needs a PID namespace", spec.Path)
	}
	spec.prepared = true
	c, path, err := begin(spec)
	if err != nil {
		return nil, err
	}
	return &Prepared{c: c, path: path}, nil
}

// Start runs the prepared command with what of spec is a start's own: its
// Env, Logger, Resumable and Proved (the rest is what Prepare was given).
// As Start does, unless Proved, it first reclaims what dead leaderrun
// processes left in their cgroups. It fails, wrapping ErrPreparedGone,
// when the prepared start was used or closed or its init died: then start
// the command anew. A Prepared is used by one goroutine at a time.
func (p *Prepared) Start(spec Spec) (*Child, error) {
	c := p.c
	if p.used {
		return nil, fmt.Errorf("start %q: %w", c.spec.Path, ErrPreparedGone)
	}
	p.used = true
	proved := spec.Proved
	spec = Spec{Env: spec.Env, Logger: spec.Logger, Resumable: spec.Resumable}.withDefaults()
	if c.cg != nil && !proved {
		childCgroups(spec.Logger, true)
	}
	word, err := nsinit.EncodeGo(append(spec.Env, tagEnv+"="+c.tag))
	if err != nil {
		p.abandon()
		return nil, fmt.Errorf("start %q: %w", c.spec.Path, err)
	}
	// Not while a suspension freezes the trees: Suspend reads what this
	// sets, and the command must not start frozen.
	suspendMu.Lock()
	theReaper.mu.Lock()
	select {
	case <-c.reaped:
		theReaper.mu.Unlock()
		suspendMu.Unlock()
		p.abandon()
		return nil, fmt.Errorf("start %q: %w (its init ended: %v)", c.spec.Path, ErrPreparedGone, c.Status())
	default:
	}
	// What the run goroutine reads once the init is reaped, which is
	// later: the reaper closes reaped under this lock.
	c.logger, c.spec.Logger, c.spec.Resumable = spec.Logger, spec.Logger, spec.Resumable
	theReaper.mu.Unlock()
	_, err = c.word.Write(word)
	c.word.Close()
	suspendMu.Unlock()
	if err != nil {
		p.abandon()
		return nil, fmt.Errorf("start %q: %w: %v", c.spec.Path, ErrPreparedGone, err)
	}
	c.logStarted(p.path)
	return c, nil
}

// Close gives the prepared start up, if Start did not use it: its init
// exits without running anything, and Close returns once it is gone.
func (p *Prepared) Close() {
	if !p.used {
		p.used = true
		p.abandon()
	}
}

// abandon ends the init that never got (or could not take) the word,
// quietly: no command ran, so there is no child to say was stopped.
func (p *Prepared) abandon() {
	theReaper.mu.Lock()
	p.c.logger = slog.New(slog.DiscardHandler)
	theReaper.mu.Unlock()
	p.c.word.Close()
	p.c.Stop()
}
