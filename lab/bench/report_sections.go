package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

func (r *report) handoffSection(w *mdw) {
	w.p("## 1. Graceful hand-off")
	w.p("")
	w.p("%d replicas campaign for one name; the benchmark stops the holder and measures from its `kill()` call to", r.Opt.Replicas)
	w.p("the next replica's child's own CLOCK_MONOTONIC reading at the top of `main` (the child then writes a file,")
	w.p("which the benchmark sees through inotify: \"seen\" below; \"old child told to stop\" is the old child's own reading")
	w.p("when its stop signal reached it). The stopped replica is replaced before the next run,")
	w.p("after a random pause of 100–200 ms. Default timings (TTL 15 s, renew every 2 s, kill grace 5 s). Every child")
	w.p("takes an exclusive `flock` at start, which the kernel drops only when it dies: \"lock held\" counts children that")
	w.p("found their predecessor still alive. Target (§8): p50 no slower than etcdctl lock's in this run; p99 ≤ 3 × p50.")
	w.p("")
	w.p("leaderrun runs in its default mode, each command in a PID namespace of its own; the rows marked")
	w.p("`--pid-namespace=false` are the same replicas without it, the baseline of the namespace's cost. Each system's")
	w.p("runs were made in %d blocks, and the systems took turns block by block, so that the machine's slow and quiet", handoffRounds)
	w.p("minutes fell on all of them alike.")
	w.p("")
	w.p("| system | how the holder is stopped | runs | p50 | p90 | p99 | max | seen p50 | old child told to stop p50 | direct-exec baseline p50 | p50 ÷ baseline | old child alive at next start / lock held | target |")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, h := range r.Handoff {
		s, d, det := summarize(h.Latency), summarize(h.Direct), summarize(h.Detect)
		verdict := "(peer)"
		switch {
		case h.C.NoPIDNamespace:
			verdict = "(baseline)"
		case h.C.Tool == "leaderrun":
			_, verdict = r.handoffVerdict(h)
		}
		w.p("| %s | %s | %d | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %s | %d / %d | %s |", h.C.Label, h.C.StopHow, s.N,
			ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max), ms(det.P50), ms(summarize(h.Told).P50), ms(d.P50), dratio(s.P50, d.P50),
			h.OldChildAlive+h.Overlaps, h.LockConflicts, verdict)
	}
	w.p("")
	for _, h := range r.Handoff {
		ex := summarize(h.HolderExit)
		tok := ""
		if h.C.Tool == "leaderrun" {
			tok = fmt.Sprintf(" LEADERRUN_TOKEN increased at every hand-over except %d.", h.TokenNotIncreasing)
		}
		w.p("- %s: the stopped holder exited %s ms (p50) after the signal.%s Machine CPU busy during the runs: %s.%s",
			h.C.Label, ms(ex.P50), tok, r.busy("handoff "+h.C.Label), notes(h))
	}
	w.p("")
}

func notes(h *failoverResult) string {
	if len(h.Notes) == 0 && h.Failed == 0 {
		return ""
	}
	return " Problems: " + strings.Join(h.Notes, "; ") + "."
}

func (r *report) stepDownSection(w *mdw) {
	w.p("## 2. Planned hand-over: step-down")
	w.p("")
	w.p("Three replicas at default timings; the benchmark runs `leaderrun step-down --wait NAME` against the leader")
	w.p("after a random pause of 0.2–2.2 s (so the request lands at a random phase of the leader's 2 s renew interval),")
	w.p("and measures from just before that command's `fork` to the new child's own start reading. \"request → old child")
	w.p("told to stop\" is when the old child received its stop signal (the leader noticed the request); the rest is the")
	w.p("ordered hand-over (stop, release, wake, acquire, spawn). etcdctl lock has no step-down. Target (§8): p50 ≤ 50 ms,")
	w.p("both to the new child and to `step-down --wait`'s report of the new leader.")
	w.p("")
	w.p("| system | runs | p50 | p90 | p99 | max | request → old child told to stop, p50 / max | old child told to stop → new child, p50 / max | `step-down --wait` returned, p50 | overlaps / lock held / back to the same replica | target p50s ≤ 50 ms |")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.StepDown {
		sm := summarize(s.Latency)
		if sm.N == 0 {
			w.p("| leaderrun · %s | 0 | | | | | | | | | not measured: %s |", s.Store, strings.Join(s.Notes, "; "))
			continue
		}
		n := summarize(s.Noticed)
		var rest []time.Duration
		if len(s.Noticed) == len(s.Latency) {
			for i := range s.Latency {
				rest = append(rest, s.Latency[i]-s.Noticed[i])
			}
		}
		rs := summarize(rest)
		ce := summarize(s.CmdExit)
		w.p("| leaderrun · %s | %d | %s ms | %s ms | %s ms | %s ms | %s / %s ms | %s / %s ms | %s ms | %d / %d / %d | %s |", s.Store, sm.N,
			ms(sm.P50), ms(sm.P90), ms(sm.P99), ms(sm.Max), ms(n.P50), ms(n.Max), ms(rs.P50), ms(rs.Max), ms(ce.P50),
			s.Overlaps, s.LockConflicts, s.SameReplica, met(s.verdict()))
	}
	w.p("")
	for _, s := range r.StepDown {
		extra := ""
		if len(s.Notes) > 0 {
			extra = " Problems: " + strings.Join(s.Notes, "; ") + "."
		}
		w.p("- leaderrun · %s: LEADERRUN_TOKEN increased at every hand-over except %d. Machine CPU busy: %s.%s",
			s.Store, s.TokenNotIncreasing, r.busy("stepdown "+s.Store), extra)
	}
	w.p("")
}

func (r *report) crashSection(w *mdw) {
	w.p("## 3. Crash failover")
	w.p("")
	w.p("SIGKILL to the holder process (leaderrun, or etcdctl) at a random phase of its renew (keep-alive) period;")
	w.p("measured from `kill()` to the next replica's child start. All replicas run on this one host, so these rows are")
	w.p("also the measurement of §11's same-host failover (target: p99 ≤ 100 ms), whatever the binary does today. A lease")
	w.p("can run out at most one TTL after the holder's last renewal, and the holder renewed at most one period before it")
	w.p("died, so without a same-host fast path the expected value lies between TTL − period and TTL (plus detection).")
	w.p("Short timings: leaderrun `--ttl 3s --kill-grace 1s` (renew deadline 1 s, renew every 250 ms); etcdctl `--ttl=3`")
	w.p("(keep-alive every TTL/3). leaderrun's scenarios ran one after another, beside etcdctl's (which wait out their TTLs,")
	w.p("idle), so that no other scenario's replicas started or crashed during a measured one. For leaderrun the")
	w.p("benchmark also reads the dead holder's record from the store right after the")
	w.p("kill: \"lease expiry → next child\" is the latency minus the time the lease had left, i.e. the follower's detection")
	w.p("+ acquire + spawn, which is what the 250 ms of the general target pays for whatever the phase of the kill. (etcd")
	w.p("reports lease TTLs in whole seconds, too coarse for this; its column is empty.)")
	w.p("")
	w.p("| system | TTL | runs | p50 | p99 | max | p50 ÷ TTL | max ÷ TTL | max − TTL | lease expiry → next child p50 / max | old child alive at next start / lock held | old child still running 1 s later | target ≤ TTL + 250 ms | same host: p99 ≤ 100 ms |")
	w.p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range r.Crash {
		if c == nil {
			continue
		}
		s := summarize(c.Latency)
		verdict, same := met(s.N > 0 && s.Max <= c.TTL+targetCrashSlack), met(s.N > 0 && s.P99 <= targetSameHostP99)
		if c.C.Tool != "leaderrun" {
			verdict, same = "(peer)", "(peer)"
		}
		exp := "–"
		if a := summarize(c.AfterExpiry); a.N > 0 {
			exp = fmt.Sprintf("%s / %s ms", ms(a.P50), ms(a.Max))
			if c.C.Tool == "leaderrun" {
				verdict += fmt.Sprintf("; expiry → child ≤ 250 ms: %s", met(a.Max <= targetCrashSlack))
			}
		}
		w.p("| %s | %v | %d | %s ms | %s ms | %s ms | %.3f | %.3f | %s ms | %s | %d / %d | %d | %s | %s |", c.C.Label, c.TTL, s.N,
			ms(s.P50), ms(s.P99), ms(s.Max), float64(s.P50)/float64(c.TTL), float64(s.Max)/float64(c.TTL),
			ms(s.Max-c.TTL), exp, c.OldChildAlive, c.LockConflicts, c.OldChildStillRunning, verdict, same)
	}
	w.p("")
	var tokRuns, tokBad int
	for _, c := range r.Crash {
		if c != nil && c.C.Tool == "leaderrun" {
			tokRuns += len(c.Latency)
			tokBad += c.TokenNotIncreasing
		}
	}
	w.p("LEADERRUN_TOKEN increased at every leaderrun failover except %d (of %d). Machine CPU busy during the crash runs: %s.", tokBad, tokRuns, r.busy("crash"))
	w.p("")
	for _, c := range r.Crash {
		if c != nil && (len(c.Notes) > 0 || c.Failed > 0) {
			w.p("- %s, TTL %v: %s", c.C.Label, c.TTL, strings.Join(c.Notes, "; "))
		}
	}
	w.p("")
}

func (r *report) costSection(w *mdw) {
	w.p("## 4. Store cost")
	w.p("")
	w.p("One leader and 1, 2 or 8 followers at default timings (TTL 15 s, renew every 2 s), idle, over a %v window", r.Opt.CostWindow)
	w.p("after start-up. Each group had a namespace of its own (a file, a database, a key prefix); the groups on SQLite,")
	w.p("PostgreSQL, MariaDB and Redis ran at the same time. On etcd the counters are the cluster's, so its groups ran one")
	w.p("at a time with nothing else on the cluster (leaderrun's, then etcdctl lock's). Target (§8): one leader and two")
	w.p("followers ≤ 1 statement per second.")
	w.p("")
	w.p("| system | followers | window | per second, total | per follower | how counted | what | target (1 + 2) |")
	w.p("|---|---|---|---|---|---|---|---|")
	costs := slices.Clone(r.Cost)
	order := func(c *costResult) int {
		if i := slices.Index(storeNames, c.Store); i >= 0 && c.Tool == "leaderrun" {
			return i
		}
		return len(storeNames)
	}
	slices.SortStableFunc(costs, func(a, b *costResult) int {
		if d := order(a) - order(b); d != 0 {
			return d
		}
		return a.Followers - b.Followers
	})
	for _, c := range costs {
		if c.Err != "" {
			w.p("| %s | %d | – | error: %s | | | | |", c.Label(), c.Followers, c.Err)
			continue
		}
		tgt := ""
		if c.Followers == 2 {
			tgt = fmt.Sprintf("≤ 1: %s", met(c.PerSecond() <= targetStmtPerSec))
			if c.Tool != "leaderrun" {
				tgt = "(peer)"
			}
		}
		per := "–"
		if c1 := r.costOf(c.Label(), 1); c1 != nil && c1.Err == "" && c.Followers > 1 {
			per = fmt.Sprintf("%.2f", (c.PerSecond()-c1.PerSecond())/float64(c.Followers-1))
		}
		how := "Δ xact_commit+xact_rollback"
		switch c.Store {
		case "SQLite":
			how = fmt.Sprintf("strace: %.1f reads/s + %.2f writes/s", c.Reads/c.Window.Seconds(), c.Writes/c.Window.Seconds())
		case "MariaDB":
			how = "counting proxy"
		case "Redis":
			how = "MONITOR"
		case "etcd":
			how = "gRPC metrics"
		}
		w.p("| %s | %d | %.0f s | %.2f %s | %s | %s | %s | %s |", c.Label(), c.Followers, c.Window.Seconds(), c.PerSecond(), c.Unit, per, how, byRate(c), tgt)
	}
	r.serverLoadRows(w)
	w.p("")
	w.p("\"per follower\" is the growth from 1 follower, divided by the followers added. \"what\" breaks the count down")
	w.p("(per second). Machine CPU busy during this section (with the idle-footprint processes of section 7, which ran")
	w.p("at the same time): %s.", r.busy("cost"))
	w.p("")
	w.p("How it was counted:")
	w.p("")
	w.p("- PostgreSQL: every store operation is one statement in its own transaction, so the delta of")
	w.p("  `xact_commit + xact_rollback` in `pg_stat_database` for a database that only that group used is the")
	w.p("  statement count (pg_stat_statements is not preloaded on this server). Backends flush statistics at most once")
	w.p("  a second and idle ones within about 10 s, so each end of the window can be off by a few transactions; the")
	w.p("  window starts 12 s after start-up. LISTEN itself runs once per connection, before the window.")
	w.p("- MariaDB: the server is shared with other users and has neither performance_schema nor userstat on, so it")
	w.p("  cannot count one client's statements; its global `Questions` counts everyone's. Each group therefore reached")
	w.p("  the server through a TCP proxy of its own in the benchmark, which counts the command packets the group's")
	w.p("  connections sent (the protocol's first byte of each command; leaderrun's driver interpolates parameters, so a")
	w.p("  statement is one COM_QUERY). The server-wide `Questions` over the same windows, for comparison: %s.", r.globals("MariaDB"))
	for _, c := range costs {
		if c.Store == "MariaDB" && c.Err == "" && len(c.Kinds) > 0 {
			w.p("  MariaDB, %d follower(s), statements per second by their first words: %s.", c.Followers, byRate(&costResult{By: c.Kinds, Window: c.Window}))
		}
	}
	w.p("- Redis: the commands the server executed for the group's connections, from the server's own `MONITOR` feed,")
	w.p("  attributed by client address; each group's connections carry a client name of their own (CLIENT LIST). A Lua")
	w.p("  script counts once (the EVALSHA), not the commands it runs inside the server. Server-wide INFO commandstats over")
	w.p("  the same windows, for comparison: %s.", r.globals("Redis"))
	w.p("- etcd: the delta of `grpc_server_msg_received_total` summed over the three members: one per unary request, one")
	w.p("  per message a client sends on a stream (a lease keep-alive, a watch request). Raft traffic between members is")
	w.p("  not gRPC and not counted.")
	w.p("- SQLite has no server to ask. The benchmark attaches `strace -f` to the leaderrun processes for the window")
	w.p("  and counts transactions from the locks SQLite takes on the WAL index (the -shm file): every transaction, a read")
	w.p("  or a write, first takes a read lock on one of the five read-mark bytes (123–127), and a write transaction also")
	w.p("  takes the writer's lock (byte 120); only locks granted count (a write attempt that finds another connection")
	w.p("  writing fails, and SQLite begins the transaction again from its busy handler: one statement, not several).")
	w.p("  A calibration in the same run checks the count against the SQLite store's")
	w.p("  own `Get` (a read) and `Renew` (a write), run 20 and 220 times under strace:")
	if r.Cal.Err != "" {
		w.p("  calibration failed: %s.", r.Cal.Err)
	} else {
		w.p("  per Get %.2f transactions (%.2f writes), per Renew %.2f transactions (%.2f writes). Two connections of one",
			r.Cal.TxnsPerRead, r.Cal.WritesPerRead, r.Cal.TxnsPerWrite, r.Cal.WritesPerWrite)
		w.p("  process reading at the same instant share one lock (SQLite tracks WAL-index locks per process) and would")
		w.p("  count once; in an idle follower that overlap is rare, so this errs low, not high.")
	}
	for _, c := range costs {
		if c.Store == "SQLite" && c.Err == "" && c.Leader.Calls != nil {
			secs := c.Window.Seconds()
			w.p("- SQLite, %d follower(s), system calls per second — leader: %s; followers together: %s.",
				c.Followers, c.Leader.describe(secs), c.Follow.describe(secs))
		}
	}
	w.p("")
}

// byRate lists a cost result's breakdown per second, largest first.
func byRate(c *costResult) string {
	if len(c.By) == 0 {
		return ""
	}
	keys := slices.Collect(maps.Keys(c.By))
	slices.SortFunc(keys, func(a, b string) int {
		if d := c.By[b] - c.By[a]; d != 0 {
			return int(d)
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(c.By[k])/c.Window.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// globals lists the server-wide cross-checks of a store's cost groups.
func (r *report) globals(store string) string {
	var gs []string
	for _, c := range r.Cost {
		if c.Store == store && c.Global != "" {
			gs = append(gs, fmt.Sprintf("%d follower(s): %s", c.Followers, c.Global))
		}
	}
	if len(gs) == 0 {
		return "not recorded"
	}
	slices.Sort(gs)
	return strings.Join(gs, "; ")
}

func (r *report) peerSection(w *mdw) {
	w.p("## 8. Peer: etcdctl lock")
	w.p("")
	if r.EtcdVer == "" {
		w.p("%s", firstNonEmpty(r.PeerNote, "Not measured."))
		w.p("")
		return
	}
	w.p("etcd %s, three members on 127.0.0.1 (data dirs in a temp dir, started and stopped by the benchmark); replicas are", r.EtcdVer)
	w.p("`etcdctl --endpoints A,B,C lock --ttl=N NAME -- child`, on the same cluster as leaderrun's etcd rows. Its rows are")
	w.p("in the tables of sections 1, 3 and 4. Install on Debian/Ubuntu with `apt-get update && apt-get install -y etcd-server")
	w.p("etcd-client` (the package also enables an etcd service; the benchmark starts its own on free loopback ports). It")
	w.p("installs nothing and reports the peer as missing when `etcd` or `etcdctl` is not on PATH.")
	w.p("")
	w.p("No peer was measured for partitions: `consul lock -n` (a semaphore of n holders) is the nearest widely used tool,")
	w.p("and consul is not installed on this machine (apt has no candidate for it), so that row of the comparison is empty.")
	w.p("")
	p := r.TermProbe
	if p.Ran {
		w.p("SIGTERM to the etcdctl process alone (not its group), %s later: its child still running: **%s**; etcdctl still", p.ChildRunningAt.Round(time.Millisecond), yesNo(p.ChildRunning))
		if p.ChildRunning && !p.LockMoved {
			w.p("running: %s; the lock moved to another replica: no. etcdctl does not pass the signal on to the command it", yesNo(p.HolderRunning))
			w.p("runs and keeps the lock while that runs, so section 1 stops etcdctl's whole process group, as a service")
			w.p("manager or a terminal's Ctrl-C would. leaderrun is stopped by signalling the leaderrun process only.")
		} else {
			w.p("running: %s; the lock moved to another replica: %s. Section 1 stopped etcdctl's whole process group.", yesNo(p.HolderRunning), yesNo(p.LockMoved))
		}
		w.p("")
	}
	var alive, runs, locks int
	for _, c := range r.Crash {
		if c != nil && c.C.Tool == "etcdctl lock" {
			alive += c.OldChildStillRunning
			runs += len(c.Latency)
			locks += c.LockConflicts
		}
	}
	if runs > 0 {
		w.p("After SIGKILL to etcdctl, its child was still running 1 s after the next replica's child had started in **%d of %d** runs", alive, runs)
		w.p("(and the next child found the old one's lock held in %d): two children ran at once (the orphan keeps running until", locks)
		w.p("something else kills it; the benchmark kills it).")
		var lr, lrRuns int
		for _, c := range r.Crash {
			if c != nil && c.C.Tool == "leaderrun" {
				lr += c.OldChildAlive
				lrRuns += len(c.Latency)
			}
		}
		w.p("For leaderrun the old child was alive at the next child's start in %d of %d runs (Pdeathsig kills the namespace's", lr, lrRuns)
		w.p("init with its supervisor, and the kernel every process in the namespace with its init).")
		w.p("")
	}
}

func (r *report) scaleSection(w *mdw) {
	w.p("## 5. Scale: %d names on one PostgreSQL", r.Opt.ScaleNames)
	w.p("")
	s := r.Scale
	if s == nil {
		w.p("Not measured (%s).", firstNonEmpty(r.PGNote, "section not selected"))
		w.p("")
		return
	}
	if s.Err != "" {
		w.p("Failed: %s", s.Err)
		w.p("")
		return
	}
	w.p("%d in-process `elect.Elector`s per name, one per replica, each replica one `lease.Open` PostgreSQL Store", s.Replicas)
	w.p("(%d Stores, %d electors), default timings; each elector started at a random moment within one renew", s.Replicas, s.Replicas*s.Names)
	w.p("period. The window began 5 s after all %d names were held (which took %s). Renew latency is timed", s.Names, s.RampUp.Round(time.Millisecond))
	w.p("around `Store.Renew`, so it includes waiting for one of the Store's connections.")
	w.p("")
	w.p("| | value | target |")
	w.p("|---|---|---|")
	w.p("| window | %.0f s | |", s.Window.Seconds())
	w.p("| names held at start / end | %d / %d | %d |", s.Held, s.HeldEnd, s.Names)
	w.p("| renews | %d (%.0f/s) | |", s.Renews, float64(s.Renews)/s.Window.Seconds())
	w.p("| renew latency p50 / p90 / p99 / max | %s / %s / %s / %s ms | p99 ≤ 50 ms: %s |", ms(s.Renew.P50), ms(s.Renew.P90), ms(s.Renew.P99), ms(s.Renew.Max), met(s.Renew.P99 <= targetRenewP99))
	w.p("| renew errors / ErrLost | %d / %d | |", s.RenewErrs, s.RenewLost)
	w.p("| spurious losses (tenures ended, cause ≠ ErrReleased) | %d | 0: %s |", s.Losses, met(s.Losses == 0))
	w.p("| statements/s (Δ xacts) | %.0f | |", float64(s.Xacts)/s.Window.Seconds())
	w.p("| database CPU: the %d backends of the database | %.1f%% of one core | |", s.BackendPids, 100*s.DBBackends.Seconds()/s.Window.Seconds())
	w.p("| database CPU: postmaster and auxiliary processes (WAL writer, checkpointer, …; shared with other users) | %.1f%% of one core | |", 100*s.DBAux.Seconds()/s.Window.Seconds())
	w.p("| the electors' process (the benchmark itself) | %.1f%% of one core | |", 100*s.BenchCPU.Seconds()/s.Window.Seconds())
	own := (s.BenchCPU + s.DBBackends + s.DBAux).Seconds() / s.Window.Seconds()
	w.p("| the whole machine busy / of which not the above (other processes) | %.2f / %.2f of %d CPUs | |", s.MachineBusy, max(0, s.MachineBusy-own), r.Machine.CPUs)
	w.p("")
	if len(s.LossCauses) > 0 {
		for c, n := range s.LossCauses {
			w.p("- loss cause: %d× %s", n, c)
		}
	}
	for _, e := range s.ErrSamples {
		w.p("- renew error: %s", e)
	}
	w.p("")
}

func (r *report) footprintSection(w *mdw) {
	w.p("## 7. Footprint")
	w.p("")
	w.p("Idle leader and standby (default timings), sampled over %v after 3 s of warm-up: RSS from", r.Opt.IdleWindow)
	w.p("`/proc/PID/status` (VmRSS at the end, VmHWM the peak since start), CPU from utime+stime in `/proc/PID/stat`.")
	w.p("")
	w.p("| store | role | VmRSS | of which RssAnon / RssFile | VmHWM | CPU (%% of one core) | target |")
	w.p("|---|---|---|---|---|---|---|")
	idle := slices.Clone(r.Idle)
	slices.SortStableFunc(idle, func(a, b idleResult) int { return strings.Compare(b.Store, a.Store) })
	for _, i := range idle {
		if i.Err != "" {
			w.p("| %s | %s | error: %s | | | | |", i.Store, i.Role, i.Err)
			continue
		}
		w.p("| %s | %s | %.1f MB | %.1f / %.1f MB | %.1f MB | %.2f%% | RSS ≤ 20 MB: %s |", i.Store, i.Role, float64(i.RSSKB)/1024,
			float64(i.AnonKB)/1024, float64(i.FileKB)/1024, float64(i.HWMKB)/1024, i.CPUPercent(), met(i.RSSKB <= targetIdleRSSKB))
	}
	w.p("")
	w.p("RssFile is pages of mapped files — nearly all the leaderrun binary itself — which replicas on one host share")
	w.p("through the page cache; RssAnon is each process's own memory.")
	w.p("")
	w.p("Binary: %.1f MB (%d bytes).", float64(r.BinSize)/1e6, r.BinSize)
	w.p("")
	e := r.Exec
	if e == nil {
		return
	}
	w.p("Start-to-exec: `leaderrun --once --store sqlite:FILE -- child` with the file already created and the name free,")
	w.p("from just before `fork` to the child's first clock reading; in the default mode and with `--pid-namespace=false`")
	w.p("(taking turns to go first), interleaved with the same child spawned directly.")
	if e.Err != "" {
		w.p("")
		w.p("Error: %s", e.Err)
	}
	w.p("")
	w.p("Machine CPU busy during these runs: %s.", r.busy("exec"))
	w.p("")
	v, n, d := summarize(e.Via), summarize(e.ViaNoNS), summarize(e.Direct)
	w.p("| | runs | p50 | p90 | p99 | max | p50 ÷ direct p50 | target |")
	w.p("|---|---|---|---|---|---|---|---|")
	w.p("| via leaderrun (default: PID namespace) | %d | %s ms | %s ms | %s ms | %s ms | %s | ≤ 50 ms: %s |", v.N, ms(v.P50), ms(v.P90), ms(v.P99), ms(v.Max), dratio(v.P50, d.P50), met(v.N > 0 && v.P99 <= targetExec))
	w.p("| via leaderrun --pid-namespace=false | %d | %s ms | %s ms | %s ms | %s ms | %s | the namespace adds %s ms at p50 (≤ %s ms): %s |", n.N, ms(n.P50), ms(n.P90), ms(n.P99), ms(n.Max), dratio(n.P50, d.P50),
		signedMs(v.P50-n.P50), ms(targetNamespaceStart), met(n.N > 0 && v.P50-n.P50 <= targetNamespaceStart))
	w.p("| direct (baseline) | %d | %s ms | %s ms | %s ms | %s ms | 1.00× | |", d.N, ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Max))
	for _, t := range []struct {
		how string
		ds  []time.Duration
	}{{"", e.Total}, {" --pid-namespace=false", e.TotalNoNS}} {
		s := summarize(t.ds)
		w.p("| leaderrun%s start → exit (child exits at once; includes release) | %d | %s ms | %s ms | %s ms | %s ms | | |", t.how, s.N, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
	}
	w.p("")
}
