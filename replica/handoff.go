package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/samehost"
)

// successorWait bounds how long a leader stopped by a signal waits, after
// its release, for the successor's command to run before it closes the
// store and exits.
const successorWait = 100 * time.Millisecond

// successorQuiet is how long after its release a stopped leader leaves the
// store alone before it first looks for the successor: a hand-off takes
// about 10 ms, and a read sooner finds no successor yet while it competes
// with the successor's read, acquire and start for the store's CPU (and,
// on a shared host, for the host's): the pause made PostgreSQL's hand-off
// faster in alternating benchmark runs (bench/findings.md).
const successorQuiet = elect.StartQuiet

// announceStop tells the followers on this host, through the tenure's end
// signal, when a stop signal or a step-down that names no successor
// (openStepDown) begins to end the tenure: the one that claims it takes
// the name at once, while this replica's command stops, and starts its own
// once the end signal or this process's death says that command's tree is
// gone (a seize on PostgreSQL took 2 ms, the command's stop about 1 ms:
// bench/findings.md). It returns when the tenure ends.
func (s *single) announceStop(ten *elect.Tenure, sig *samehost.EndSignal) {
	if sig == nil {
		return
	}
	select {
	case <-s.stopping:
		stoppingWord(ten, sig)
	case <-ten.Context().Done():
		if openStepDown(ten) {
			sig.Stopping() // the tenure no longer renews: nothing to yield
		}
	}
}

// stoppingWord yields ten and writes the stopping word into its end signal
// sig, once: a stop signal ends the tenure. The stop signal's goroutine
// calls it at once (Replica.stopWord), announceStop as well.
func stoppingWord(ten *elect.Tenure, sig *samehost.EndSignal) {
	if sig != nil && ten.Context().Err() == nil {
		ten.Yield()
		sig.Stopping()
	}
}

// setStopWord sets, or clears with nil, what the stop signal's goroutine
// calls to tell this host's followers that the tenure ends.
func (s *single) setStopWord(word func()) {
	s.mu.Lock()
	s.stopWord = word
	s.mu.Unlock()
}

// openStepDown reports whether ten ended at a step-down request that names
// no successor. Its reservation, in the record since the request, keeps
// only this replica out, and a Seize honours it: a follower on this host
// may take the name at the end signal, as after a stop signal. A successor
// named with --to may run on another host, and another follower here may
// claim the end signal first: the release, through the store, reaches it.
func openStepDown(ten *elect.Tenure) bool {
	rec, ok := ten.StepDownRequest()
	return ok && rec.Successor == ""
}

// handBack ends a tenure whose command's whole tree is gone: it sends the
// end signal, so that a follower on this host may take the name before a
// release reaches it through the store (unless a release is to reserve
// the name for another: a step-down with a successor, a partition's
// hand-off; then after it), and releases. It reports how the name went
// on.
func (s *single) handBack(ten *elect.Tenure, end tenureEnd, sig *samehost.EndSignal, log *slog.Logger) handedBack {
	if end.reserved && !openStepDown(ten) {
		return releasedIf(s.release(ten, log, end.why, false))
	}
	watched := sig.Watched()
	sig.Send()
	if watched && s.handedOver(ten) {
		s.letGo(ten, end)
		log.Info("tenure over; a follower on this host took the name at our end signal", "why", end.why)
		return takenHere
	}
	return releasedIf(s.release(ten, log, end.why, watched))
}

// handedBack is how a tenure's name went on at its end.
type handedBack int

const (
	kept      handedBack = iota // neither released nor taken over: it expires
	released                    // released, or taken over through the store
	takenHere                   // taken at the end signal by a follower on this host
)

func releasedIf(ok bool) handedBack {
	if ok {
		return released
	}
	return kept
}

// letGo ends a tenure that a follower took at the end signal. A replica
// that campaigns on (its command exited, or it stepped down) releases it:
// the store refuses (ErrLost), and lets go of what it kept for the tenure,
// which on MySQL is the named lock that waiters on the store block on
// until it is freed or the old lease expires. One that exits leaves it
// (its sessions end with it) and stays off the new command's start.
func (s *single) letGo(ten *elect.Tenure, end tenureEnd) {
	if end.stopped || s.cfg.Once || s.stopped() {
		ten.Abandon()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	ten.Release(ctx) // ErrLost: the name is the follower's
}

// handOverLook is how long after its end signal a leader that a follower
// on this host watches first leaves the store alone, and handOverWait how
// long in all it waits for that follower's seize before it releases: a
// release sent at once raced the seize for the record (and, on PostgreSQL,
// woke every listener) while the seize had to commit, and slowed it; and
// a read while the follower's command starts (on etcd a read costs every
// member CPU) slowed that start. The pause is about a start's: should the
// seize fail, the release comes that much later.
const (
	handOverLook = successorQuiet
	handOverWait = 50 * time.Millisecond
)

// handedOver reports whether another holder took the name after ten within
// handOverWait of its end signal.
func (s *single) handedOver(ten *elect.Tenure) bool {
	return s.awaitNewer(ten, handOverLook, handOverWait, func(lease.Record) bool { return true })
}

// awaitSuccessor returns once another replica's command runs under the name
// (the record shows a newer tenure, and where its command runs), or after
// successorWait. Until then the store's connections stay open: closing a
// PostgreSQL connection ends a server process, which costs the server
// milliseconds of CPU (OpenSSL's cleanup, unmapping its memory), two or
// three per replica. Closed at once, those land on the successor's read,
// its acquire and its command's start, and slow the hand-off. It first
// reads after successorQuiet. It returns at once when the store says
// nobody else campaigns for the name, so that a lone --once run's SIGTERM
// does not wait for nobody; how says whether to ask: a follower on this
// host that took the name (takenHere) campaigned.
func (s *single) awaitSuccessor(ten *elect.Tenure, how handedBack) {
	if how != takenHere && !s.othersCampaign() {
		s.log.Debug("no other replica campaigns for the name; not waiting for a successor")
		return
	}
	s.awaitNewer(ten, successorQuiet, successorWait, func(r lease.Record) bool { return r.Where != "" })
}

// othersCampaign reports whether another replica is a live candidate for
// the name, or the store cannot tell (its answer did not come within
// successorWait).
func (s *single) othersCampaign() bool {
	ctx, cancel := context.WithTimeout(context.Background(), successorWait)
	defer cancel()
	list, err := s.elector.Store.Candidates(ctx, s.cfg.Name)
	return err != nil || len(lease.Others(list, s.holder)) > 0
}

// awaitNewer leaves the store alone for quiet, then reads until the record
// shows a tenure newer than ten for which ok holds (true), or until limit
// (from the call) has passed or the store fails (false).
func (s *single) awaitNewer(ten *elect.Tenure, quiet, limit time.Duration, ok func(lease.Record) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	time.Sleep(quiet)
	store := s.elector.Store
	for {
		rec, err := store.Get(ctx, s.cfg.Name)
		switch {
		case err != nil:
			return false
		case rec.Held() && rec.Token > ten.Token() && ok(rec):
			return true
		}
		if store.Wait(ctx, s.cfg.Name, rec, limit) != nil || ctx.Err() != nil {
			return false
		}
	}
}

// endSignal opens the tenure's end signal (package samehost), or returns nil:
// without one, a graceful hand-over reaches a follower through the store
// only. A tenure held for --hold-at-least gets none: its name must stay
// taken until its lease expires.
func (s *single) endSignal(log *slog.Logger) *samehost.EndSignal {
	if s.cfg.HoldAtLeast > 0 {
		return nil
	}
	sig, err := newEndSignal()
	if err != nil {
		// Said once at warning level: followers on this host then take
		// the name only through the store, more slowly, and the cause
		// (a runtime directory others may write, say) is the
		// operator's to mend.
		level := slog.LevelWarn
		if s.saidNoEndSignal.Swap(true) {
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, "no end signal for followers on this host; a graceful hand-over reaches them through the store, more slowly", "err", err)
		return nil
	}
	return sig
}

// newEndSignal makes a tenure's end signal; tests replace it.
var newEndSignal = samehost.NewEndSignal
