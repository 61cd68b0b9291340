package replica

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/samehost"
)

// The same-host proof of death, shared by both modes: each tenure records
// where its holder and command run (annotate), and a replica on the same
// host proves, from that record, that the holder died and its command's
// tree is gone (prover) before it takes the name, or a partition, over,
// instead of waiting for the lease's expiry.

// prover is the Prover that an Elector (one name) or an Owner (a group's
// partitions) uses to watch holders on this host.
func (r *Replica) prover() elect.Prover { return &samehost.Prover{Logger: r.log} }

// annotateAfter is how long after its command's fork a tenure's holder
// records where it runs. The record is a store write that wakes every follower,
// and each reads the record back: done at the fork, that work competes
// with the new command's exec and start for the host's CPU, and waiting
// made the hand-off faster in alternating benchmark runs
// (bench/findings.md). Should this process die
// before then, the name passes at the lease's expiry, as it would have
// within the write's own few milliseconds.
const annotateAfter = 20 * time.Millisecond

// annotate records in the tenure's record, annotateAfter after the
// command's start, where this process and its command c run and its end
// signal sig (package samehost; nil for a partition), so that a follower
// on this host can take the name (or, in a group, a member on this host
// the partition) over at once should this process die or end the tenure;
// without it, a crash hands the name over at the lease's expiry. It retries a
// failed store call every renew interval, and ends with the tenure.
func (r *Replica) annotate(ten *elect.Tenure, c child, sig *samehost.EndSignal, log *slog.Logger) {
	started, ok := c.(interface{ StartTime() uint64 })
	if !ok {
		return // a fake in the loop's tests
	}
	w, err := samehost.Here(c.Pid(), started.StartTime())
	if err != nil {
		log.Debug("cannot tell where the command runs; should this process die, the name passes at the lease's expiry", "err", err)
		return
	}
	w = sig.Mark(w)
	select {
	case <-time.After(annotateAfter):
	case <-ten.Context().Done():
		return
	}
	for {
		ctx, cancel := context.WithTimeout(ten.Context(), r.cfg.RetryPeriod)
		err := ten.Annotate(ctx, w.String())
		cancel()
		switch {
		case err == nil:
			log.Debug("recorded where the command runs, for followers on this host", "where", w.String())
			return
		case ten.Context().Err() != nil, errors.Is(err, lease.ErrLost):
			return
		}
		log.Warn("cannot record where the command runs; retrying (until then, should this process die, the name passes at the lease's expiry)", "err", err)
		select {
		case <-time.After(r.cfg.RetryPeriod):
		case <-ten.Context().Done():
			return
		}
	}
}
