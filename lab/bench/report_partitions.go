package main

import (
	"fmt"
	"strings"
	"time"
)

// spread is the most and fewest partitions a member owned at any
// convergence with members members, and whether the most stayed within
// ⌈N/members⌉ every time.
func (p *partResult) spread(members int) (most, fewest int, ok bool) {
	ok, fewest = true, p.N
	seen := false
	for _, s := range p.Owned {
		if s.Members != members {
			continue
		}
		seen = true
		most, fewest = max(most, s.Max), min(fewest, s.Min)
		ok = ok && s.Max <= s.Cap
	}
	if !seen {
		return 0, 0, false
	}
	return most, fewest, ok
}

// joinBound is §9's bound for a join: reconcile interval + K + 1 s.
func (p *partResult) joinBound() time.Duration { return p.Reconcile + p.Grace + targetSlackSecond }

// moveRatios are the mean and largest partitions moved on a join, divided
// by the ideal N/M.
func (p *partResult) moveRatios() (mean, most float64) {
	if len(p.JoinMoves) == 0 {
		return 0, 0
	}
	ideal := float64(p.N) / float64(p.M)
	var sum int
	for _, n := range p.JoinMoves {
		sum += n
		most = max(most, float64(n)/ideal)
	}
	return float64(sum) / float64(len(p.JoinMoves)) / ideal, most
}

func (r *report) partitionSection(w *mdw) {
	w.p("## 6. Partitions (`--partitions N`)")
	w.p("")
	if len(r.Parts) == 0 && len(r.PartCost) == 0 {
		w.p("Not measured in this run.")
		w.p("")
		return
	}
	o := r.Opt
	w.p("A group of N = %d partitions over M = %d replicas (`leaderrun --partitions %d --identity …`), default timings", o.PartN, o.PartM, o.PartN)
	w.p("(L = 15 s, R = 2 s, K = 5 s, reconcile interval 10 s). Each partition's child is benchchild, which records its")
	w.p("start and stop with LEADERRUN_PARTITION and takes an exclusive `flock` on its partition's file: a child that finds")
	w.p("it held started while another child of the same partition was alive (\"lock held\"). \"Overlaps\" counts a")
	w.p("partition's next child starting before the previous one recorded its stop signal. The benchmark knows every")
	w.p("replica's identity, so it computes the bounded-load target (`elect.Target`) of every member set and waits")
	w.p("until every partition runs on its target owner (\"converged\"), then for 1 s without a start or stop.")
	w.p("")
	w.p("Each run stops one replica chosen at random — SIGTERM (%d runs), then SIGKILL (%d runs) — and measures from the", o.PartTerm, o.PartKill)
	w.p("signal to the moment the last of its partitions has a new child on another replica (each child's own start")
	w.p("reading). Every replica runs on this host, so after a SIGKILL the others prove its death and take its")
	w.p("partitions over at once (the same-host fast path); across hosts they would wait for the leases' expiry")
	w.p("(at most L + reconcile interval + 1 s). Once the %d others have converged, a new replica joins: from its spawn to the start of the last", o.PartM-1)
	w.p("partition of its share. \"Moved on the join\" counts every child started (on any replica) from the spawn until")
	w.p("the group converged and stayed quiet; the ideal is N/M (only the newcomer's share moves); \"target moves\" is")
	w.p("how many partitions the bounded-load target itself reassigns for that member change.")
	w.p("")
	w.p("| store | converged at start | SIGTERM → all elsewhere p50 / p90 / p99 / max | one partition's p50 / p99 | SIGKILL → all elsewhere (same host) p50 / p99 / max | SIGKILL: orphans 1 s later | join → share running p50 / p90 / max | moved on a join: mean / max (ideal N/M = %d) | target moves mean | most / fewest owned, %d members (cap) | %d members (cap) | lock held / overlaps / children started |", o.PartN/max(o.PartM, 1), o.PartM, o.PartM-1)
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range r.Parts {
		t, te, k := summarize(p.Term), summarize(p.TermEach), summarize(p.Kill)
		j := summarize(p.Join)
		var jm, tm []float64
		for i := range p.JoinMoves {
			jm = append(jm, float64(p.JoinMoves[i]))
			tm = append(tm, float64(p.JoinTargetMoves[i]))
		}
		jms := fsummarize(jm)
		mean := func(xs []float64) float64 {
			if len(xs) == 0 {
				return 0
			}
			var s float64
			for _, x := range xs {
				s += x
			}
			return s / float64(len(xs))
		}
		most, fewest, _ := p.spread(p.M)
		most1, fewest1, _ := p.spread(p.M - 1)
		w.p("| %s | %.2f s | %s / %s / %s / %s ms (%d runs) | %s / %s ms | %s / %s / %s ms (%d runs) | %d | %.2f / %.2f / %.2f s (%d) | %.1f / %.0f | %.1f | %d / %d (%d) | %d / %d (%d) | %d / %d / %d |",
			p.Store, p.Converge.Seconds(), ms(t.P50), ms(t.P90), ms(t.P99), ms(t.Max), t.N, ms(te.P50), ms(te.P99),
			ms(k.P50), ms(k.P99), ms(k.Max), k.N, p.KillOrphans, j.P50.Seconds(), j.P90.Seconds(), j.Max.Seconds(), j.N,
			mean(jm), jms.Max, mean(tm), most, fewest, (p.N+p.M-1)/max(p.M, 1), most1, fewest1, (p.N+p.M-2)/max(p.M-1, 1),
			p.LockConflicts, p.Overlaps, p.Starts)
	}
	w.p("")
	w.p("Targets (§9), judged:")
	w.p("")
	for _, p := range r.Parts {
		t, k, j := summarize(p.Term), summarize(p.Kill), summarize(p.Join)
		most, _, spreadOK := p.spread(p.M)
		meanR, mostR := p.moveRatios()
		twice := p.LockConflicts + p.Overlaps
		w.p("- %s: most owned ≤ ⌈N/M⌉ = %d: %s (most %d); SIGTERM → elsewhere p99 ≤ 500 ms: %s (%s ms); same-host SIGKILL → elsewhere p99 ≤ 500 ms: %s (%s ms, max %s ms);",
			p.Store, (p.N+p.M-1)/max(p.M, 1), met(spreadOK), most, met(t.N > 0 && t.P99 <= targetPartTermP99), ms(t.P99),
			met(k.N > 0 && k.P99 <= targetPartKillP99), ms(k.P99), ms(k.Max))
		w.p("  join → share ≤ %v: %s (max %.2f s); no partition ever running twice: %s (%d lock held, %d overlaps);",
			p.joinBound(), met(j.N > 0 && j.Max <= p.joinBound()), j.Max.Seconds(), met(twice == 0), p.LockConflicts, p.Overlaps)
		w.p("  moved on a join ≤ 1.5 × N/M: %s (mean %.2f×, max %.2f×). Machine CPU busy: %s.%s",
			met(len(p.JoinMoves) > 0 && mostR <= targetPartMoves), meanR, mostR, r.busy("partitions "+p.Store), partNotes(p))
	}
	w.p("")
	w.p("### Store load and renewal rounds at 16 and 1,024 partitions")
	w.p("")
	w.p("%d replicas of a group of 16, and of 1,024, partitions at default timings, each partition's child a plain `sleep`;", o.PartM)
	w.p("once both sizes had every partition owned and the spread stable for 2 s, 12 s more, then a %v window, the two", o.PartCostWindow)
	w.p("sizes' windows at the same time; PostgreSQL first, then SQLite. Rounds and their latency come from the replicas' own `/metrics`")
	w.p("(`--http-addr`): `leaderrun_store_calls_total{op=\"renew\"}` (one per round) and the")
	w.p("`leaderrun_renew_duration_seconds` histogram (on SQLite without the replica under strace, which slows every")
	w.p("system call it traces), whose buckets end at 1, 2.5, 5, 10, 25, 50, 100, 250 ms …: a")
	w.p("quantile is reported as the upper bound of its bucket. Partition tenures that ended during the window (any cause)")
	w.p("are spurious losses: nothing moved. Targets (§8, §9): a replica's statements/s at 1,024 within 10%% of 16; at")
	w.p("1,024 partitions on PostgreSQL, renew p99 ≤ 50 ms and no spurious loss.")
	w.p("")
	w.p("| store | partitions | settled after | window | a replica's statements/s | statements per round | rounds/s (all replicas) | renew round mean; p50 / p99 / max bucket | share ≤ 50 ms | reconcile p50 / p99 bucket | partitions owned at the end | tenures ended in the window | leaderrun CPU, %% of one core per replica | how counted |")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range r.PartCost {
		if c == nil {
			continue
		}
		if c.Err != "" {
			w.p("| %s | %d | error: %s | | | | | | | | | | | |", c.Store, c.N, c.Err)
			continue
		}
		w.p("| %s | %d | %.1f s | %.0f s | %.3f | %.2f | %.2f | %s ms; ≤ %s / ≤ %s / ≤ %s ms | %.1f%% | ≤ %s / ≤ %s ms | %d of %d | %.0f | %.1f%% | %s |",
			c.Store, c.N, c.Converge.Seconds(), c.Window.Seconds(), c.PerReplica(), c.PerRound(), c.Rounds/c.Window.Seconds(),
			msf(c.RenewSum/c.Renew.N()), msf(c.Renew.quantileBound(0.5)), msf(c.Renew.quantileBound(0.99)), msf(c.Renew.quantileBound(1)),
			100*c.Renew.fractionAtMost(0.05), msf(c.Reconcile.quantileBound(0.5)), msf(c.Reconcile.quantileBound(0.99)),
			c.OwnedEnd, c.N, c.Ends, 100*c.CPU.Seconds()/c.Window.Seconds()/float64(max(c.M, 1)), how(c))
	}
	w.p("")
	for _, st := range []string{"SQLite", "PostgreSQL"} {
		a, z := r.partCostOf(st, 16), r.partCostOf(st, 1024)
		if a == nil || z == nil || a.Err != "" || z.Err != "" || a.PerReplica() == 0 {
			continue
		}
		g := z.PerReplica() / a.PerReplica()
		w.p("- %s: statements/s at 1,024 ÷ at 16 = %.3f ÷ %.3f = %.2f; target ≤ 1.10: %s. Machine CPU busy: %s.", st, z.PerReplica(), a.PerReplica(), g, met(g <= targetPartGrowth), r.busy("partcost "+st))
	}
	w.p("")
}

// how says how a partitioned cost row was counted; on SQLite with the
// write transactions that found another replica writing and were retried.
func how(c *partCostResult) string {
	if c.Store != "SQLite" {
		return c.How
	}
	return fmt.Sprintf("%s (%.2f reads/s, %.2f writes/s; %.2f busy write retries/s)", c.How,
		c.Reads/c.Window.Seconds(), c.Writes/c.Window.Seconds(), c.Busy/c.Window.Seconds())
}

func partNotes(p *partResult) string {
	if len(p.Notes) == 0 {
		return ""
	}
	return " Problems: " + strings.Join(p.Notes, "; ") + "."
}
