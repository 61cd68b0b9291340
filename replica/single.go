package replica

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

// single runs the campaign → tenure → release cycle for one name, as
// the name's leader or as a follower that campaigns for it.
type single struct {
	*Replica
	elector *elect.Elector // set by run once the store is open
	child   child          // the running command; guarded by mu
	// saidNoEndSignal: that a tenure could make no end signal was said
	// at warning level once (endSignal).
	saidNoEndSignal atomic.Bool
	// check runs one health check (runCheck, or a fake).
	check func(ctx context.Context, cmd string, env []string, timeout time.Duration, log *slog.Logger) checkResult
}

func newSingle(r *Replica) *single {
	s := &single{Replica: r, check: runCheck}
	r.mode = s
	r.deliver = true
	r.children = func() []child {
		r.mu.Lock()
		defer r.mu.Unlock()
		if s.child == nil {
			return nil
		}
		return []child{s.child}
	}
	return s
}

// run opens the store, then runs tenures until told to stop.
func (s *single) run() error {
	store, err := s.openStore()
	if err != nil {
		return err
	}
	defer store.Close()
	if err := s.checkMode(store, false); err != nil {
		return err
	}
	s.useStore(store)
	s.report.campaigning()
	s.log.Info("campaigning", "store", store.Describe())
	err = s.loop()
	s.ahead.close()
	s.withdraw(store, s.cfg.Name) // it campaigns no more
	return err
}

// useStore makes the loop campaign in store.
func (s *single) useStore(store lease.Store) {
	rc := s.cfg
	s.elector = &elect.Elector{
		Store: store, Name: rc.Name, Holder: s.holder,
		LeaseDuration: rc.LeaseDuration, RenewDeadline: rc.RenewDeadline, RetryPeriod: rc.RetryPeriod,
		Logger: s.log, Observe: s.report.storeCall, Clock: s.clock,
		Prover:       s.prover(),
		Candidacy:    lease.Candidacy{Priority: int32(rc.Priority), Preempt: rc.Preempt}, // config bounds Priority to int32
		PreemptDelay: rc.PreemptDelay,
	}
}

// loop runs tenures until told to stop, --once, or an error that no retry
// can fix.
func (s *single) loop() error {
	var exits restarts
	previous := "none" // how this replica's previous tenure ended
	for {
		started := time.Now()
		s.ahead.prepare() // for the tenure this campaign may win
		ten, err := s.campaign()
		if err != nil {
			return err
		}
		log := s.log.With("token", ten.Token())
		if s.stopped() {
			// The stop signal came as the campaign won (a follower
			// stopped together with its leader may take the name at the
			// leader's stopping word): start nothing, hand the name on.
			s.release(ten, log, "stop signal before the command started", false)
			s.log.Info("stopped while standing by")
			return context.Canceled
		}
		electedAt := time.Now()
		s.report.elected(ten.Token())
		log.Info("elected; starting command", "campaign_waited", time.Since(started).Round(time.Millisecond),
			"previous_tenure", previous, "command", strings.Join(s.cfg.Command, " "))
		sig := s.endSignal(log)
		go s.announceStop(ten, sig)
		s.setStopWord(func() { stoppingWord(ten, sig) })
		env := s.childEnv(ten)
		health := s.healthGuard(ten, env, log)
		end := s.serve(ten, env, log, func(c child) {
			s.child = c
			if c != nil {
				go s.annotate(ten, c, sig, log)
				health.start()
				if s.cfg.Hooks != nil {
					s.cfg.Hooks.Started()
				}
			}
		}, s.stopping, health.restart)
		health.end()
		s.setStopWord(nil)
		if s.cfg.Hooks != nil && end.startErr == nil {
			s.cfg.Hooks.Ended()
		}
		how := kept
		if s.holding(end) {
			s.hold(ten, log, electedAt.Add(s.cfg.HoldAtLeast), end.why)
		} else {
			how = s.handBack(ten, end, sig, log)
		}
		sig.Send()
		s.report.ended(ten, end.status, end.exited)
		if end.startErr != nil && s.cfg.Once {
			return end.startErr
		}
		previous = end.why
		status := end.status
		switch {
		case end.stopped:
			if how != kept {
				s.awaitSuccessor(ten, how)
			}
			return &Exit{status}
		case s.cfg.Once:
			return &Exit{status}
		case s.stopped():
			// The stop came after this tenure had ended for another
			// reason: there was no child left to stop.
			s.log.Info("stopped while standing by")
			return context.Canceled
		}
		if !end.exited {
			continue // lost the tenure: stand by for the next one
		}
		delay := s.countExit(&exits, end, log, "campaigning again", time.Now())
		select {
		case <-time.After(delay):
		case <-s.stopping:
			s.log.Info("stopped while standing by")
			return context.Canceled // no child to stop: exit 0, as documented
		}
	}
}

// campaign waits for the name, for at most --acquire-timeout.
func (s *single) campaign() (*elect.Tenure, error) {
	ctx, cancel := s.campaignContext()
	defer cancel()
	ten, err := s.elector.Campaign(ctx)
	if err != nil {
		return nil, s.campaignError(ctx, err)
	}
	return ten, nil
}

// holding reports whether a tenure that ended so keeps the name for
// --hold-at-least: not when it was lost, or when an operator asked it to
// step down.
func (s *single) holding(end tenureEnd) bool {
	return s.cfg.HoldAtLeast > 0 && (end.exited || end.stopped)
}

// hold keeps renewing the tenure until `until` (or until it is lost, or a
// stop signal comes), then stops renewing without releasing: nobody else
// takes the name before until, nor before the lease expires after it. The
// child and its descendants are dead by now.
func (s *single) hold(ten *elect.Tenure, log *slog.Logger, until time.Time, why string) {
	if wait := time.Until(until); wait > 0 {
		log.Info("command over; holding the lease for --hold-at-least", "why", why,
			"hold", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ten.Context().Done():
		case <-s.stopping:
		}
	}
	ten.Abandon()
	log.Info("tenure over; left the lease to expire, for --hold-at-least", "why", why)
}
