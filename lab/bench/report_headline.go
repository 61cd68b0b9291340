package main

import (
	"fmt"
	"strings"
	"time"
)

// rowFunc writes one row of the headline: f gives the cell of each column.
type rowFunc func(what, target string, f func(label string) string)

// targetNamespaceStart is what leaderrun's default mode (a PID namespace)
// may add to a start over --pid-namespace=false, at p50.
const targetNamespaceStart = 5 * time.Millisecond

func (r *report) headline(w *mdw) {
	cols := r.columns()
	w.p("## Headline")
	w.p("")
	w.p("Each cell: the measurement, then whether it meets the target; the sections below give the evidence.")
	w.p("Every leaderrun figure is of its default mode (the command in a PID namespace of its own) unless the row")
	w.p("says `--pid-namespace=false`.")
	w.p("")
	w.p("| measurement | target | %s |", strings.Join(cols, " | "))
	w.p("|---|---|%s", strings.Repeat("---|", len(cols)))
	row := func(what, target string, f func(label string) string) {
		var cs []string
		for _, c := range cols {
			cs = append(cs, f(c))
		}
		w.p("| %s | %s | %s |", what, target, strings.Join(cs, " | "))
	}
	r.handoffRows(row)
	r.crashRows(row)
	r.loadRows(row)
	r.partitionRows(row)
	r.footprintRows(row)
	w.p("")
	var missing []string
	for _, name := range storeNames {
		if n, ok := r.StoreNotes[name]; ok {
			missing = append(missing, fmt.Sprintf("%s %s", name, n))
		}
	}
	if len(missing) > 0 {
		w.p("Stores not measured: %s.", strings.Join(missing, "; "))
		w.p("")
	}
	if r.PeerNote != "" {
		w.p("Peer note: %s", r.PeerNote)
		w.p("")
	}
}

// handoffRows: the graceful hand-off in the default mode, its baseline
// without the namespace, and the step-down.
func (r *report) handoffRows(row rowFunc) {
	peerP50 := "no peer in this run"
	if p, ok := r.peerHandoffP50(); ok {
		peerP50 = ms(p) + " ms this run"
	}
	row("graceful hand-off p50 / p99 (ms)", fmt.Sprintf("p50 ≤ etcdctl lock's (%s); p99 ≤ 3 × p50", peerP50), func(l string) string {
		h := r.handoffOf(l)
		if h == nil || len(h.Latency) == 0 {
			return "not measured"
		}
		s := summarize(h.Latency)
		v := fmt.Sprintf("%s / %s", ms(s.P50), ms(s.P99))
		if l == peerLabel {
			return v + " (peer)"
		}
		ok, _ := r.handoffVerdict(h)
		return v + " " + met(ok)
	})
	row("graceful hand-off with `--pid-namespace=false` p50 / p99 (ms): the baseline; the PID namespace adds (p50)", "none (the namespace's cost)", func(l string) string {
		base, h := r.handoffOf(l+noNSSuffix), r.handoffOf(l)
		if l == peerLabel || base == nil {
			return "–"
		}
		b := summarize(base.Latency)
		if b.N == 0 || h == nil || len(h.Latency) == 0 {
			return "not measured"
		}
		return fmt.Sprintf("%s / %s; %s ms", ms(b.P50), ms(b.P99), signedMs(summarize(h.Latency).P50-b.P50))
	})
	row("step-down → new child running, p50 / p99; → `step-down --wait` returned, p50 (ms)", "p50s ≤ 50 ms", func(l string) string {
		if l == peerLabel {
			return "– (etcdctl lock has no step-down)"
		}
		s := r.stepOf(storeOfLabel(l))
		if s == nil || len(s.Latency) == 0 {
			return "not measured"
		}
		sm := summarize(s.Latency)
		return fmt.Sprintf("%s / %s; --wait %s %s", ms(sm.P50), ms(sm.P99), ms(summarize(s.CmdExit).P50), met(s.verdict()))
	})
}

// signedMs formats d in milliseconds with its sign.
func signedMs(d time.Duration) string {
	if d < 0 {
		return "−" + ms(-d)
	}
	return "+" + ms(d)
}

// crashRows: crash failover at both TTLs, same-host, and orphans.
func (r *report) crashRows(row rowFunc) {
	for _, ttl := range []time.Duration{defTTL, 3 * time.Second} {
		row(fmt.Sprintf("crash failover (SIGKILL of the holder), TTL %v: p50 / max (× TTL)", ttl), "max ≤ TTL + 250 ms", func(l string) string {
			c := r.crashOf(l, ttl)
			if c == nil || len(c.Latency) == 0 {
				return "not measured"
			}
			s := summarize(c.Latency)
			v := fmt.Sprintf("%.3f / %.3f", float64(s.P50)/float64(ttl), float64(s.Max)/float64(ttl))
			if l == peerLabel {
				return v + " (peer)"
			}
			return v + " " + met(s.Max <= ttl+targetCrashSlack)
		})
	}
	for _, ttl := range []time.Duration{defTTL, 3 * time.Second} {
		row(fmt.Sprintf("same-host SIGKILL of the leader's leaderrun → new child, TTL %v: p50 / p99 / max (ms)", ttl), "p99 ≤ 100 ms (§11)", func(l string) string {
			c := r.crashOf(l, ttl)
			if c == nil || len(c.Latency) == 0 {
				return "not measured"
			}
			s := summarize(c.Latency)
			v := fmt.Sprintf("%s / %s / %s", ms(s.P50), ms(s.P99), ms(s.Max))
			if l == peerLabel {
				return v + " (peer: SIGKILL of etcdctl)"
			}
			return v + " " + met(s.P99 <= targetSameHostP99)
		})
	}
	row("old child still running 1 s after its supervisor was SIGKILLed", "never (§1)", func(l string) string {
		var runs, alive int
		for _, c := range r.Crash {
			if c != nil && c.C.Label == l {
				runs += len(c.Latency)
				alive += c.OldChildStillRunning
			}
		}
		if runs == 0 {
			return "not measured"
		}
		v := fmt.Sprintf("%d of %d runs", alive, runs)
		if l == peerLabel {
			return v + " (peer)"
		}
		return v + " " + met(alive == 0)
	})
}

// loadRows: what the replicas cost their store, and the scale test.
func (r *report) loadRows(row rowFunc) {
	row("store load, 1 leader + 2 followers, default timings (per second)", "≤ 1 statement (command, request)", func(l string) string {
		c := r.costOf(l, 2)
		if c == nil || c.Err != "" || c.Window == 0 {
			return "not measured"
		}
		v := fmt.Sprintf("%.2f %s", c.PerSecond(), c.Unit)
		if l == peerLabel {
			return v + " (peer)"
		}
		return v + " " + met(c.PerSecond() <= targetStmtPerSec)
	})
	if len(r.ServerLoad) > 0 {
		row("store load as above, counted at the server (per second)", "≤ 1", r.serverLoadCell)
	}
	row(fmt.Sprintf("%d names on one PostgreSQL: renew p99, spurious losses", r.Opt.ScaleNames), "≤ 50 ms, 0", func(l string) string {
		if l == peerLabel {
			return "no peer measured"
		}
		if storeOfLabel(l) != "PostgreSQL" {
			return "–"
		}
		s := r.Scale
		if s == nil || s.Err != "" || s.Renew.N == 0 {
			return "not measured"
		}
		return fmt.Sprintf("%s ms, %d %s", ms(s.Renew.P99), s.Losses, met(s.Renew.P99 <= targetRenewP99 && s.Losses == 0))
	})
}

// partitionRows: the partitioned section's targets, on SQLite and
// PostgreSQL.
func (r *report) partitionRows(row rowFunc) {
	partRow := func(what, target string, f func(store string) string) {
		row(what, target, func(l string) string {
			if l == peerLabel {
				return "no peer (nearest: consul lock -n, not installed)"
			}
			st := storeOfLabel(l)
			if st != "SQLite" && st != "PostgreSQL" {
				return "–"
			}
			return f(st)
		})
	}
	partRow("1,024 partitions, 4 replicas on one store: renew-round p99 (histogram bucket), spurious losses", "p99 ≤ 50 ms, 0", func(st string) string {
		c := r.partCostOf(st, 1024)
		if c == nil || c.Err != "" || c.Renew.N() == 0 {
			return "not measured"
		}
		q := c.Renew.quantileBound(0.99)
		return fmt.Sprintf("≤ %s ms, %.0f %s", msf(q), c.Ends, met(q <= targetRenewP99.Seconds() && c.Ends == 0))
	})
	partRow("partitioned: a replica's statements/s at N=1,024 ÷ at N=16", "≤ 1.10", func(st string) string {
		a, z := r.partCostOf(st, 16), r.partCostOf(st, 1024)
		if a == nil || z == nil || a.Err != "" || z.Err != "" || a.PerReplica() == 0 {
			return "not measured"
		}
		g := z.PerReplica() / a.PerReplica()
		return fmt.Sprintf("%.2f / %.2f = %.2f %s", z.PerReplica(), a.PerReplica(), g, met(g <= targetPartGrowth))
	})
	partRow(fmt.Sprintf("partitioned N=%d, M=%d: most / fewest owned", r.Opt.PartN, r.Opt.PartM), "most ≤ ⌈N/M⌉", func(st string) string {
		p := r.partOf(st)
		if p == nil || len(p.Owned) == 0 {
			return "not measured"
		}
		most, fewest, ok := p.spread(p.M)
		return fmt.Sprintf("%d / %d (cap %d) %s", most, fewest, (p.N+p.M-1)/p.M, met(ok))
	})
	partRow("partitioned: SIGTERM of a replica → all its partitions running elsewhere, p50 / p99 (ms)", "p99 ≤ 500 ms", func(st string) string {
		p := r.partOf(st)
		if p == nil || len(p.Term) == 0 {
			return "not measured"
		}
		s := summarize(p.Term)
		return fmt.Sprintf("%s / %s %s", ms(s.P50), ms(s.P99), met(s.P99 <= targetPartTermP99))
	})
	partRow("partitioned: SIGKILL of a replica → all its partitions running elsewhere on the same host, p50 / p99 (ms)", "p99 ≤ 500 ms", func(st string) string {
		p := r.partOf(st)
		if p == nil || len(p.Kill) == 0 {
			return "not measured"
		}
		s := summarize(p.Kill)
		return fmt.Sprintf("%s / %s %s", ms(s.P50), ms(s.P99), met(s.P99 <= targetPartKillP99))
	})
	partRow("partitioned: a join → its share running, p50 / max (s); partitions ever running twice", "≤ reconcile interval + K + 1 s = 16 s; 0", func(st string) string {
		p := r.partOf(st)
		if p == nil || len(p.Join) == 0 {
			return "not measured"
		}
		s := summarize(p.Join)
		twice := p.LockConflicts + p.Overlaps
		return fmt.Sprintf("%.2f / %.2f, %d %s", s.P50.Seconds(), s.Max.Seconds(), twice, met(s.Max <= p.joinBound() && twice == 0))
	})
	partRow("partitioned: partitions moved on a join, mean / max ÷ ideal N/M", "≤ 1.5", func(st string) string {
		p := r.partOf(st)
		if p == nil || len(p.JoinMoves) == 0 {
			return "not measured"
		}
		mean, most := p.moveRatios()
		return fmt.Sprintf("%.2f / %.2f %s", mean, most, met(most <= targetPartMoves))
	})
}

// footprintRows: idle RSS, the start of a command, and what the PID
// namespace adds to it.
func (r *report) footprintRows(row rowFunc) {
	row("idle RSS, leader / standby (MB)", "≤ 20", func(l string) string {
		switch storeOfLabel(l) {
		case "SQLite", "PostgreSQL":
			return r.idleCell(storeOfLabel(l))
		}
		return "–"
	})
	e := r.Exec
	exec := func(f func(e *execResult) string) func(l string) string {
		return func(l string) string {
			if storeOfLabel(l) != "SQLite" {
				return "–"
			}
			if e == nil || len(e.Via) == 0 {
				return "not measured"
			}
			return f(e)
		}
	}
	row("start-to-exec p50 / p99 (ms), uncontested", "≤ 50", exec(func(e *execResult) string {
		s, d := summarize(e.Via), summarize(e.Direct)
		return fmt.Sprintf("%s / %s (%s the direct exec) %s", ms(s.P50), ms(s.P99), dratio(s.P50, d.P50), met(s.P99 <= targetExec))
	}))
	row("start-to-exec with `--pid-namespace=false` p50 (ms); the PID namespace adds (p50)", fmt.Sprintf("adds ≤ %s ms", ms(targetNamespaceStart)), exec(func(e *execResult) string {
		s, b := summarize(e.Via), summarize(e.ViaNoNS)
		if b.N == 0 {
			return "not measured"
		}
		return fmt.Sprintf("%s; %s ms %s", ms(b.P50), signedMs(s.P50-b.P50), met(s.P50-b.P50 <= targetNamespaceStart))
	}))
}
