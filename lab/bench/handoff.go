package main

import (
	"context"
	"slices"
)

// handoffRounds is how many blocks each system's hand-offs are split into;
// the blocks of all systems take turns (see runHandoffs).
const handoffRounds = 5

// namespaceBaselineStores are the stores whose hand-off is also measured
// with --pid-namespace=false, as the baseline of the namespace's cost: the
// stores the design's hand-off target names.
var namespaceBaselineStores = []string{"SQLite", "PostgreSQL"}

// runHandoffs measures the graceful hand-off of leaderrun on every store in
// its default mode, on namespaceBaselineStores also with
// --pid-namespace=false, and of etcdctl lock. Each system's runs are split
// into handoffRounds blocks, and the systems take turns block by block
// (each round in another order), so that a slow minute on the shared
// machine falls on all of them alike.
func (b *bench) runHandoffs(ctx context.Context, rep *report) {
	var cs []*contender
	for _, st := range b.stores {
		dsn, err := st.fresh(ctx, "handoff")
		if err != nil {
			rep.StoreNotes[st.Name+" hand-off"] = err.Error()
			continue
		}
		cs = append(cs, b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod))
		if slices.Contains(namespaceBaselineStores, st.Name) {
			cs = append(cs, withoutPIDNamespace(b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod)))
		}
	}
	if b.etcdSrv != nil {
		cs = append(cs, b.etcdContender(peerLabel, b.etcdSrv, defTTL))
	}
	runs := b.opt.handoffRuns
	rounds := min(handoffRounds, max(runs, 1))
	results := make([]*failoverResult, len(cs))
	busy := make([]float64, len(cs))
	for round := range rounds {
		n := runs/rounds + btoi(round < runs%rounds)
		for k := range cs {
			i := (round + k) % len(cs)
			if b.stopping() {
				break
			}
			b.progress("hand-off: %s, round %d/%d, %d runs", cs[i].Label, round+1, rounds, n)
			done := machineBusy()
			results[i] = results[i].add(b.runFailover(cs[i], "handoff", n, b.opt.replicas))
			busy[i] += done() / float64(rounds)
		}
	}
	for i, r := range results {
		if r != nil {
			rep.Handoff = append(rep.Handoff, r)
			rep.Busy["handoff "+cs[i].Label] = busy[i]
		}
	}
	if b.etcdSrv != nil && !b.stopping() {
		b.progress("etcdctl: SIGTERM to etcdctl alone")
		rep.TermProbe = b.probeEtcdTerm(b.etcdSrv, defTTL)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// add returns r with o's samples and counts added; r may be nil.
func (r *failoverResult) add(o *failoverResult) *failoverResult {
	if r == nil {
		return o
	}
	r.Latency = append(r.Latency, o.Latency...)
	r.Detect = append(r.Detect, o.Detect...)
	r.Direct = append(r.Direct, o.Direct...)
	r.HolderExit = append(r.HolderExit, o.HolderExit...)
	r.Told = append(r.Told, o.Told...)
	r.AfterExpiry = append(r.AfterExpiry, o.AfterExpiry...)
	r.Remaining = append(r.Remaining, o.Remaining...)
	r.OldChildAlive += o.OldChildAlive
	r.OldChildStillRunning += o.OldChildStillRunning
	r.Overlaps += o.Overlaps
	r.TokenNotIncreasing += o.TokenNotIncreasing
	r.LockConflicts += o.LockConflicts
	r.Failed += o.Failed
	r.Notes = append(r.Notes, o.Notes...)
	return r
}
