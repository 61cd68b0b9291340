package samehost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

// Prover proves a holder on this host dead (elect.Prover): see the package
// documentation. The zero value is ready to use.
type Prover struct {
	// Logger receives the proof's log lines; nil discards them.
	Logger *slog.Logger
}

var _ elect.Prover = (*Prover)(nil)

// Prove implements elect.Prover. It returns an error wrapping ErrUnprovable
// (and elect.ErrElsewhere for another host, elect.ErrOtherNamespace for
// another PID namespace) when it cannot
// verify what rec.Where names, having signalled nothing; after the holder
// died, when it cannot kill or see the whole of the command's group (the
// follower then waits for the expiry; the kills already sent stand). It
// returns ended true when the holder lives but sent its EndSignal and its
// command's whole tree is gone, and this follower is the first on the host
// to claim the signal (it keeps the claim until ctx ends, so past the
// Seize); the others return elect.ErrOtherTakes. The claim may come
// earlier, at the holder's word that it is stopping its command: Prove
// then calls ending and waits on for the end or the holder's death. An
// EndSignal that finds the tree still there proves nothing, and it waits
// on for the holder's death.
func (p *Prover) Prove(ctx context.Context, rec lease.Record, ending func()) (ended bool, err error) {
	w, err := Parse(rec.Where)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnprovable, err)
	}
	holder, child, tree, err := watchable(w)
	if err != nil {
		return false, err
	}
	defer holder.Close()
	defer child.Close()
	log := p.logger().With("leader", rec.Holder, "leader_token", rec.Token, "leader_pid", w.Pid, "command_pid", w.Child)
	// The holder's user, read while it lives, for its end signal's
	// removal once it is dead.
	uid, uidErr := holder.uid()
	end, err := openEnd(w, holder)
	switch {
	case errors.Is(err, errNotEnd):
		log.Warn("the leader's record names an end signal that is not the leader's; a graceful hand-over goes through the store", "err", err)
	case err != nil:
		// The death of the holder still proves the tenure over.
		log.Debug("cannot watch for the leader's end signal; a graceful hand-over goes through the store", "err", err)
	}
	claimed := false // the end signal's claim outlives Prove
	if end != nil {
		defer func() {
			if claimed {
				context.AfterFunc(ctx, func() { end.Close() })
			} else {
				end.Close()
			}
		}()
	}
	log.Info("watching the leader on this host; should it die, its command's whole tree is killed and the lease taken at once")
	// The goroutines end at the latest when the deferred Closes above
	// close their files.
	dead := make(chan error, 1)
	go func() { dead <- holder.wait(ctx) }()
	words := make(chan byte, 1)
	// read sends the next word, skipping stopping words once this
	// follower has taken its own (the other followers' copies).
	read := func(skipStopping bool) {
		for {
			b, err := end.read(ctx)
			if err != nil {
				return
			}
			if !skipStopping || b != wordStopping {
				words <- b
				return
			}
		}
	}
	if end != nil {
		go read(false)
	}
	// readOn reads on for the end word once this follower took the name
	// at the stopping word, and only when the command's exit does not
	// prove the tree gone by itself (it cannot be watched, or its cgroup
	// still holds processes then): the other followers' copies of the
	// stopping word, read one byte at a time, would take the CPU the old
	// command's stop and the seize need.
	readOn := sync.OnceFunc(func() { go read(true) })
	// gone: once this follower took the name at the stopping word, the
	// command's exit, with its whole tree gone, proves the tenure over
	// without the holder's reap of it and its end word.
	// A process of the command's cgroup may still be exiting then: the
	// tree is looked at again, ever less often, until it is gone or the
	// end word or the holder's death comes first.
	var gone chan struct{}
	again := 100 * time.Microsecond
watch:
	for {
		select {
		case err = <-dead:
			break watch
		case <-gone:
			if holder.exited() {
				err = <-dead // its death, not an end: the dead holder's path
				break watch
			}
			if why := treeGone(child, tree); why != nil {
				if again == 100*time.Microsecond {
					log.Debug("the leader's command exited, its tree not yet gone; looking again", "why", why)
					readOn()
				}
				gone = make(chan struct{}, 1)
				go func(gone chan<- struct{}, d time.Duration) {
					if pause(ctx, d) == nil {
						gone <- struct{}{}
					}
				}(gone, again)
				again = min(2*again, 20*time.Millisecond)
				continue
			}
			log.Info("the leader on this host ended its tenure; its command's whole tree is gone", "seen_at", "the command's exit")
			return true, nil
		case word := <-words:
			switch {
			case holder.exited():
				err = <-dead
				break watch
			case word == wordStopping:
				if claimed = end.claim(); !claimed {
					return false, elect.ErrOtherTakes
				}
				log.Info("the leader on this host is stopping its command; taking the lease now, our command starts once that one is gone")
				ending()
				gone = make(chan struct{}, 1)
				go func(gone chan<- struct{}) {
					if child.wait(ctx) == nil {
						gone <- struct{}{}
					} else {
						readOn()
					}
				}(gone)
				continue
			}
			// Only the holder writes the end word, and only once its
			// tree is gone: anything else proves nothing, and only its
			// death can now.
			if why := treeGone(child, tree); why != nil {
				log.Info("the leader's end signal came, but not from a finished tenure; waiting for the leader's death", "why", why)
				err = <-dead
				break watch
			}
			if !claimed {
				if claimed = end.claim(); !claimed {
					return false, elect.ErrOtherTakes
				}
			}
			log.Info("the leader on this host ended its tenure; its command's whole tree is gone")
			return true, nil
		}
	}
	if err != nil {
		return false, err
	}
	died := time.Now()
	what := "process group"
	if tree.cgroup != "" {
		what = "cgroup"
		log.Info("the leader on this host died; killing its command's cgroup", "cgroup", tree.cgroup)
		err = clearCgroup(ctx, child, tree.cgroup)
	} else {
		log.Info("the leader on this host died; killing its command's process group")
		err = p.clear(ctx, child)
	}
	if err != nil {
		return false, err
	}
	log.Info("the dead leader's command and its "+what+" are gone", "took", time.Since(died).Round(time.Microsecond))
	if uidErr == nil {
		removeDeadEnd(w, uid) // what the killed leader could not remove
	}
	return false, nil
}

// ErrUnprovable is wrapped by every error of Prove that says it cannot
// prove the holder dead, rather than that its context ended.
var ErrUnprovable = errors.New("cannot prove the leader dead on this host")

// watchable opens pidfds on the holder and its command that w names, after
// checking that they run on this boot and in this PID namespace, that this
// process may signal the command and its group, and that it can kill the
// command's whole tree once the holder is dead (treeOf).
func watchable(w Where) (holder, child *process, t tree, err error) {
	s, err := thisProcess()
	switch {
	case err != nil:
		return nil, nil, t, fmt.Errorf("%w: %w", ErrUnprovable, err)
	case w.Boot != s.boot:
		return nil, nil, t, fmt.Errorf("%w: %w (boot id %s)", ErrUnprovable, elect.ErrElsewhere, w.Boot)
	case w.PIDNS != s.PIDNS:
		return nil, nil, t, fmt.Errorf("%w: %w (PID namespace %d)", ErrUnprovable, elect.ErrOtherNamespace, w.PIDNS)
	case w.Pid == s.Pid:
		return nil, nil, t, fmt.Errorf("%w: the leader is this process", ErrUnprovable)
	case w.Pgid != w.Child:
		return nil, nil, t, fmt.Errorf("%w: the command %d does not lead its process group %d", ErrUnprovable, w.Child, w.Pgid)
	}
	if err := seesAll(); err != nil {
		return nil, nil, t, fmt.Errorf("%w: %w", ErrUnprovable, err)
	}
	// The holder runs the program this process runs, by name: a hint that
	// spares other processes a wait, never proof of identity (anyone may
	// name a program leaderrun). Nothing below rests on it: the holder is
	// the parent of the command, and nothing of the holder's is opened
	// but its end signal, after openEnd's checks.
	holder, err = openProcess(w.Pid, w.Start, identity{comm: s.Comm})
	if err != nil {
		return nil, nil, t, fmt.Errorf("%w: the leader: %w", ErrUnprovable, err)
	}
	child, err = openProcess(w.Child, w.ChildStart, identity{parent: w.Pid})
	if err != nil {
		holder.Close()
		// No process has the pid: the command has just exited. (Another
		// process under it may be a reuse or a forged record: said at
		// info, as everything the follower refuses.)
		if errors.Is(err, unix.ESRCH) || errors.Is(err, os.ErrNotExist) {
			return nil, nil, t, fmt.Errorf("%w: %w: %w", ErrUnprovable, elect.ErrCommandGone, err)
		}
		return nil, nil, t, fmt.Errorf("%w: the leader's command: %w", ErrUnprovable, err)
	}
	err = child.signal(0)
	if err == nil || errors.Is(err, unix.ESRCH) {
		err = child.signalGroup(0)
	}
	switch {
	case errors.Is(err, unix.ESRCH):
		// The command exited while the holder lives: the holder's
		// stop sequence has killed or is killing what it left, and the
		// group kill covers what is still in its group.
		return holder, child, t, nil
	case err == nil:
		if t, err = treeOf(w, child); err == nil {
			return holder, child, t, nil
		}
	case errors.Is(err, unix.EINVAL):
		err = fmt.Errorf("this kernel cannot signal a process group through a pidfd (Linux 6.9 can): %w", err)
	case errors.Is(err, unix.EPERM):
		err = fmt.Errorf("no permission to signal the leader's command: %w", err)
	}
	holder.Close()
	child.Close()
	return nil, nil, t, fmt.Errorf("%w: %w", ErrUnprovable, err)
}

// clear SIGKILLs the dead holder's command, the init of a PID namespace of
// its own (treeOf), and the process group it leads, and returns once the
// command has exited. The kernel reports the exit of a namespace's init
// only after every other process of the namespace has exited, and every
// process of the init's group descends from the init, so inside the
// namespace: the init's exit is the whole tree's, and no scan of /proc for
// the group's members follows (it would find the unreaped init only, and
// cost a scan per partition of a dead member per follower). Every signal
// goes through the command's pidfd.
func (p *Prover) clear(ctx context.Context, child *process) error {
	if err := child.signal(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: kill the command: %w", ErrUnprovable, err)
	}
	if err := child.signalGroup(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: kill the command's process group: %w", ErrUnprovable, err)
	}
	return child.wait(ctx)
}

// clearCgroup SIGKILLs the dead holder's command and every process in its
// cgroup, and returns once all have exited.
func clearCgroup(ctx context.Context, child *process, dir string) error {
	if err := child.signal(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%w: kill the command: %w", ErrUnprovable, err)
	}
	if err := killCgroup(ctx, dir); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", ErrUnprovable, err)
	}
	return child.wait(ctx)
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Prover) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.New(slog.DiscardHandler)
}
