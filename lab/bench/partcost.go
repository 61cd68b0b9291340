package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// partCostResult is the idle store load of M replicas of a group of N
// partitions, and their renewal rounds' latency, over Window.
type partCostResult struct {
	Store    string
	N, M     int
	Window   time.Duration
	Converge time.Duration // spawn → every partition owned, balanced
	How      string
	// PostgreSQL: Δ(xact_commit + xact_rollback) of the group's database,
	// all M replicas.
	Xacts int64
	// SQLite: the first replica alone, under strace.
	Traced        traced
	Reads, Writes float64
	// Busy: write attempts that found another replica writing, retried.
	Busy float64
	// Rounds: renewal rounds over the window, all replicas
	// (leaderrun_store_calls_total{op="renew"}); RoundsTraced: the traced
	// replica's.
	Rounds, RoundsTraced float64
	// Renew and Reconcile: the window's leaderrun_renew_duration_seconds
	// and leaderrun_reconcile_duration_seconds, all replicas (on SQLite
	// all but the one under strace). Ends counts all replicas.
	Renew, Reconcile histogram
	// RenewSum is the window's leaderrun_renew_duration_seconds_sum.
	RenewSum float64
	// Ends: partition tenures that ended during the window, any cause (in
	// an idle group every one is a spurious loss).
	Ends float64
	// OwnedEnd: partitions owned at the end, all replicas.
	OwnedEnd int
	// CPU is the leaderrun processes' CPU time over the window, all
	// replicas (their children, plain sleeps, use none).
	CPU time.Duration
	Err string
}

// PerReplica is one replica's statements per second.
func (r *partCostResult) PerReplica() float64 {
	if r.Window <= 0 {
		return 0
	}
	if r.Store == "SQLite" {
		return (r.Reads + r.Writes) / r.Window.Seconds()
	}
	return float64(r.Xacts) / float64(r.M) / r.Window.Seconds()
}

// PerRound is statements per renewal round.
func (r *partCostResult) PerRound() float64 {
	if r.Store == "SQLite" {
		if r.RoundsTraced == 0 {
			return 0
		}
		return (r.Reads + r.Writes) / r.RoundsTraced
	}
	if r.Rounds == 0 {
		return 0
	}
	return float64(r.Xacts) / r.Rounds
}

// dbOfDSN is the database a URL DSN names.
func dbOfDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// partCost runs M replicas of a group of n partitions at default timings,
// each child a plain `sleep`, and counts the store's load once they have
// settled.
//
// Every call of a batch that shares barrier (Add(1) per call) measures its
// window at the same time as the others: each waits there until all have
// settled (or failed).
func (b *bench) partCost(ctx context.Context, st *store, n, m int, window time.Duration, barrier *sync.WaitGroup) *partCostResult {
	r := &partCostResult{Store: st.Name, N: n, M: m}
	var arrived sync.Once
	arrive := func() { arrived.Do(barrier.Done) }
	defer arrive()
	if st.Name == "SQLite" && b.strace == "" {
		r.Err = "strace is not on PATH"
		return r
	}
	sleepBin := lookPath("sleep")
	if sleepBin == "" {
		r.Err = "sleep is not on PATH"
		return r
	}
	dsn, err := st.fresh(ctx, fmt.Sprintf("partcost_%d", n))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	group := fmt.Sprintf("bench-partcost-%d", n)
	var reps []*proc
	var addrs []string
	defer func() { stopAll(reps, 60*time.Second) }()
	t0 := mono.Now()
	for i := range m {
		port, err := freePort()
		if err != nil {
			r.Err = err.Error()
			return r
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		argv := []string{b.lrBin, "--name", group, "--partitions", fmt.Sprint(n), "--store", dsn,
			"--identity", fmt.Sprintf("bench-cost-r%d", i), "--http-addr", addr, "--log-level", "info",
			partitionsNamespace, "--", sleepBin, "7200"}
		p, err := b.procs.start(fmt.Sprintf("partcost-%s-%d-r%d", st.Name, n, i), argv, nil)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		reps, addrs = append(reps, p), append(addrs, addr)
	}
	scrapeAll := func() ([][]metric, error) {
		var out [][]metric
		for _, a := range addrs {
			ms, err := scrape(a)
			if err != nil {
				return nil, err
			}
			out = append(out, ms)
		}
		return out, nil
	}
	owned := func(all [][]metric) (sum, most int) {
		for _, ms := range all {
			o := int(sumMetric(ms, "leaderrun_partitions_owned", nil))
			sum, most = sum+o, max(most, o)
		}
		return sum, most
	}
	// Converged: every partition owned, none above the cap, for 2 s.
	capOwned := (n + m - 1) / m
	stable := 0
	deadline := time.Now().Add(4 * time.Minute)
	var last string // the last poll, for the error
	for stable < 4 {
		if time.Now().After(deadline) || b.stopping() {
			r.Err = fmt.Sprintf("the %d replicas did not settle on %d partitions within 4m (last poll: %s)", m, n, last)
			return r
		}
		time.Sleep(500 * time.Millisecond)
		all, err := scrapeAll()
		if err != nil {
			stable, last = 0, err.Error()
			continue
		}
		var each []string
		for _, ms := range all {
			each = append(each, fmt.Sprint(sumMetric(ms, "leaderrun_partitions_owned", nil)))
		}
		last = "owned per replica " + strings.Join(each, ", ")
		if sum, most := owned(all); sum == n && most <= capOwned {
			if stable == 0 {
				r.Converge = mono.Since(t0)
			}
			stable++
		} else {
			stable = 0
		}
	}
	arrive()
	barrier.Wait()
	b.sleep(12 * time.Second) // past the acquisitions, and past the statistics' idle flush

	var pids []int
	for _, p := range reps {
		pids = append(pids, p.pid)
	}
	cpu0 := cpuSum(pids)
	var x0 int64
	if st.Name == "PostgreSQL" {
		if x0, err = b.pg.xacts(ctx, dbOfDSN(dsn)); err != nil {
			r.Err = err.Error()
			return r
		}
	}
	m0, err := scrapeAll()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	type straced struct {
		c   traced
		d   time.Duration
		err error
	}
	sc := make(chan straced, 1)
	w0 := mono.Now()
	if st.Name == "SQLite" {
		go func() {
			c, d, err := b.straceAttach(fmt.Sprintf("partcost-%d", n), []int{reps[0].pid}, window)
			sc <- straced{c, d, err}
		}()
	} else {
		b.sleep(window)
	}
	var s straced
	if st.Name == "SQLite" {
		s = <-sc
	}
	r.Window = mono.Since(w0)
	r.CPU = cpuSum(pids) - cpu0
	m1, err := scrapeAll()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	switch st.Name {
	case "PostgreSQL":
		x1, err := b.pg.xacts(ctx, dbOfDSN(dsn))
		if err != nil {
			r.Err = err.Error()
			return r
		}
		r.Xacts = x1 - x0
		r.How = "Δ(xact_commit + xact_rollback) of the group's database ÷ replicas"
	case "SQLite":
		if s.err != nil {
			r.Err = "strace: " + s.err.Error()
			return r
		}
		r.Traced, r.Window = s.c, s.d
		r.Writes, r.Reads, r.Busy = float64(s.c.Writes), float64(s.c.Reads()), float64(s.c.Busy)
		r.How = "strace of one replica: transactions from the WAL index's locks"
	}
	renewCalls := func(ms []metric) float64 {
		return sumMetric(ms, "leaderrun_store_calls_total", map[string]string{"op": "renew"})
	}
	for i := range m0 {
		d := renewCalls(m1[i]) - renewCalls(m0[i])
		r.Rounds += d
		if i == 0 {
			r.RoundsTraced = d
		}
		r.Ends += sumMetric(m1[i], "leaderrun_tenure_ends_total", nil) - sumMetric(m0[i], "leaderrun_tenure_ends_total", nil)
		if st.Name == "SQLite" && i == 0 {
			continue // under strace, which slows every system call it traces
		}
		r.Renew = r.Renew.add(histogramOf(m1[i])("leaderrun_renew_duration_seconds").sub(histogramOf(m0[i])("leaderrun_renew_duration_seconds")))
		r.RenewSum += sumMetric(m1[i], "leaderrun_renew_duration_seconds_sum", nil) - sumMetric(m0[i], "leaderrun_renew_duration_seconds_sum", nil)
		r.Reconcile = r.Reconcile.add(histogramOf(m1[i])("leaderrun_reconcile_duration_seconds").sub(histogramOf(m0[i])("leaderrun_reconcile_duration_seconds")))
	}
	r.OwnedEnd, _ = owned(m1)
	return r
}
