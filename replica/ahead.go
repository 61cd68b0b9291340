package replica

import (
	"log/slog"
	"sync"

	"github.com/leaderrun/leaderrun/supervise"
)

// ahead is the start a standby makes ready for its next tenure
// (supervise.Prepare): the command's PID namespace, its init and its
// cgroup, waiting, so that a tenure's command starts at once, as one
// without a namespace would. It is made in the background before each
// campaign, and kept while the replica stands by; a tenure that finds none
// ready starts its command anew. The zero value (a nil *ahead too)
// prepares nothing.
type ahead struct {
	spec supervise.Spec // the command's, less a tenure's environment
	log  *slog.Logger

	mu     sync.Mutex
	ready  *supervise.Prepared
	busy   chan struct{} // while a Prepare is under way; closed when it is over
	closed bool
}

// newAhead returns what prepares r's starts: none without a PID namespace.
func newAhead(r *Replica) *ahead {
	if r.cfg.Namespace == supervise.NoNamespace {
		return nil
	}
	return &ahead{log: r.log, spec: supervise.Spec{
		Path:       r.cfg.Command[0],
		Args:       r.cfg.Command,
		Env:        []string{}, // the init's own: the command's comes with the word
		StopSignal: r.cfg.StopSignal,
		KillGrace:  r.cfg.KillGrace,
		Logger:     r.log,
		Namespace:  r.cfg.Namespace,
	}}
}

// prepare makes a start ready in the background, unless one is ready or
// under way.
func (a *ahead) prepare() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ready != nil || a.busy != nil || a.closed {
		return
	}
	busy := make(chan struct{})
	a.busy = busy
	go func() {
		defer close(busy)
		p, err := supervise.Prepare(a.spec)
		a.mu.Lock()
		a.busy = nil
		closed := a.closed
		if err == nil && !closed {
			a.ready = p
		}
		a.mu.Unlock()
		switch {
		case err != nil:
			a.log.Debug("could not prepare the next command's start; it will start without", "err", err)
		case closed:
			p.Close()
		default:
			a.log.Debug("made the next command's start ready: its namespace's init waits for a tenure")
		}
	}()
}

// take returns the start made ready, once one under way is; nil if none
// is (a start under way is as quick as a new one, and it would be left
// idle for the whole tenure).
func (a *ahead) take() *supervise.Prepared {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	if busy := a.busy; busy != nil {
		a.mu.Unlock()
		<-busy
		a.mu.Lock()
	}
	defer a.mu.Unlock()
	p := a.ready
	a.ready = nil
	return p
}

// close gives up what is ready or under way, and returns once its init
// is gone.
func (a *ahead) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.closed = true
	p, busy := a.ready, a.busy
	a.ready = nil
	a.mu.Unlock()
	if p != nil {
		p.Close()
	}
	if busy != nil {
		<-busy
	}
}

// startCommand starts a tenure's command as spec says: through the start
// made ready while standing by, if there is one, else anew.
func (r *Replica) startCommand(spec supervise.Spec) (child, error) {
	if p := r.ahead.take(); p != nil {
		c, err := p.Start(spec)
		if err == nil {
			return c, nil
		}
		spec.Logger.Debug("the start made ready is gone; starting anew", "err", err)
	}
	return r.start(spec)
}
