package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// partitionsNamespace is how the partitioned section's replicas run: without
// a PID namespace, as when its figures were measured (docs §9's targets
// were set for them), and because runningBy tells a child's replica by the
// child's parent pid.
const partitionsNamespace = "--pid-namespace=false"

// partLog collects every start and stop mark of a partitioned group's
// children, for the predicates the scenarios wait on.
type partLog struct {
	mu     sync.Mutex // guards the fields below
	starts []mark
	// stops are by pid; a pid is reused (pid_max may be 32768 and the
	// section starts thousands of children), so a stop belongs to the
	// start of that pid that it follows (see stopOf).
	stops map[int][]mark
	cur   map[int]mark // by partition: the latest start (by the child's clock)
}

// stopOf returns the stop mark of the child that start recorded. Call
// with l.mu held.
func (l *partLog) stopOf(start mark) (mark, bool) {
	var found mark
	ok := false
	for _, s := range l.stops[start.Pid] {
		if s.Partition != start.Partition || s.Token != start.Token {
			continue // another child's, that reused the pid of one killed without a stop mark
		}
		if s.At >= start.At && (!ok || s.At < found.At) {
			found, ok = s, true
		}
	}
	return found, ok
}

func newPartLog(w *watcher) *partLog {
	l := &partLog{stops: map[int][]mark{}, cur: map[int]mark{}}
	go func() {
		for {
			select {
			case m := <-w.starts:
				l.mu.Lock()
				l.starts = append(l.starts, m)
				if c, ok := l.cur[m.Partition]; !ok || m.At > c.At {
					l.cur[m.Partition] = m
				}
				l.mu.Unlock()
			case m := <-w.stops:
				l.mu.Lock()
				l.stops[m.Pid] = append(l.stops[m.Pid], m)
				l.mu.Unlock()
			case <-w.done:
				return
			}
		}
	}()
	return l
}

// waitFor polls pred (called with l.mu held) until it holds or timeout.
func (l *partLog) waitFor(timeout time.Duration, pred func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		ok := pred()
		l.mu.Unlock()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runningBy lists, by parent pid, the partitions whose latest child has
// not recorded a stop. Call with l.mu held.
func (l *partLog) runningBy() map[int][]int {
	out := map[int][]int{}
	for p, m := range l.cur {
		if _, stopped := l.stopOf(m); !stopped {
			out[m.Ppid] = append(out[m.Ppid], p)
		}
	}
	return out
}

// startsAfter counts the start marks later than t (the child's clock).
func (l *partLog) startsAfter(t int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.starts {
		if m.At > t {
			n++
		}
	}
	return n
}

// quiet waits until no start or stop mark arrived for d (at most max).
func (l *partLog) quiet(d, limit time.Duration) {
	count := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.starts) + len(l.stops)
	}
	deadline := time.Now().Add(limit)
	last, since := count(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= d {
			return
		}
	}
}

// ownedSample is the spread of partitions over the members at one moment
// of convergence.
type ownedSample struct {
	Members  int
	Max, Min int
	Cap      int // ⌈N/members⌉
}

// partResult is the partitioned section on one store.
type partResult struct {
	Store                 string
	N, M                  int
	TTL, Reconcile, Grace time.Duration
	// Converge: the first replica's spawn → every partition running on
	// its target owner (M replicas started together).
	Converge time.Duration
	Owned    []ownedSample
	// Term and Kill: the signal → the last of the stopped replica's
	// partitions running on another replica, one sample per run;
	// TermEach and KillEach are every partition's own latency.
	Term, TermEach []time.Duration
	Kill, KillEach []time.Duration
	// KillOrphans counts children of a SIGKILLed replica alive 1 s later.
	KillOrphans int
	// Join: spawn of a replica → every partition of its target share
	// running under it.
	Join []time.Duration
	// JoinMoves: partitions started anywhere while a join settled;
	// JoinTargetMoves: partitions whose target owner the join changed.
	JoinMoves, JoinTargetMoves []int
	// LockConflicts: children that found their partition's lock held by
	// another live child; Overlaps: a partition's next child started
	// before the previous one recorded its stop.
	LockConflicts, Overlaps int
	Starts                  int // children started in all
	Notes                   []string
}

func (r *partResult) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// partReplica is one leaderrun --partitions process.
type partReplica struct {
	id string
	p  *proc
}

// runPartitions measures docs §9's targets on st: M replicas of a group
// of N partitions at default timings, then SIGTERM runs and SIGKILL runs
// of one replica, each followed by a new replica joining.
func (b *bench) runPartitions(ctx context.Context, st *store, n, m, termRuns, killRuns int) *partResult {
	r := &partResult{Store: st.Name, N: n, M: m, TTL: defTTL, Reconcile: elect.DefaultReconcileInterval, Grace: 5 * time.Second}
	dsn, err := st.fresh(ctx, "part")
	if err != nil {
		r.note("store: %v", err)
		return r
	}
	dir, err := os.MkdirTemp(b.tmp, sanitize("part-"+st.Name)+"-")
	if err != nil {
		r.note("temp dir: %v", err)
		return r
	}
	w, err := newWatcher(dir)
	if err != nil {
		r.note("%v", err)
		return r
	}
	defer w.close()
	log := newPartLog(w)
	group := fmt.Sprintf("bench-part-%d", rand.IntN(1<<30))

	var all []*partReplica
	live := map[int]*partReplica{} // by pid
	defer func() {
		for _, rp := range all {
			if !rp.p.exited() {
				rp.p.killGroup(syscall.SIGTERM)
			}
		}
		for _, rp := range all {
			if !rp.p.wait(30 * time.Second) {
				rp.p.killGroup(syscall.SIGKILL)
				rp.p.wait(5 * time.Second)
			}
		}
	}()
	spawn := func() (*partReplica, error) {
		id := fmt.Sprintf("bench-%s-r%d", sanitize(st.Name), len(all))
		argv := []string{b.lrBin, "--name", group, "--partitions", fmt.Sprint(n), "--store", dsn,
			"--identity", id, "--log-level", "info", partitionsNamespace,
			"--", b.childBin, "-dir", dir, "-mode", "hold", "-lock"}
		p, err := b.procs.start(fmt.Sprintf("part-%s-%s", st.Name, id), argv, nil)
		if err != nil {
			return nil, err
		}
		rp := &partReplica{id: id, p: p}
		all = append(all, rp)
		live[p.pid] = rp
		return rp, nil
	}
	// converged waits until every partition runs on its target owner among
	// the live replicas, then for quiet, and records the spread.
	converged := func(timeout time.Duration) bool {
		ids := make([]string, 0, len(live))
		pidOf := map[string]int{}
		for pid, rp := range live {
			ids = append(ids, rp.id)
			pidOf[rp.id] = pid
		}
		target := elect.Target(group, n, ids)
		ok := log.waitFor(timeout, func() bool {
			for p := range n {
				c, ok := log.cur[p]
				if !ok || c.Ppid != pidOf[target[p]] {
					return false
				}
				if _, stopped := log.stopOf(c); stopped {
					return false
				}
			}
			return true
		})
		if !ok {
			return false
		}
		log.quiet(time.Second, 10*time.Second)
		log.mu.Lock()
		by := log.runningBy()
		log.mu.Unlock()
		s := ownedSample{Members: len(live), Min: n, Cap: (n + len(live) - 1) / len(live)}
		for pid := range live {
			s.Max, s.Min = max(s.Max, len(by[pid])), min(s.Min, len(by[pid]))
		}
		r.Owned = append(r.Owned, s)
		return true
	}

	t0 := mono.Now()
	for range m {
		if _, err := spawn(); err != nil {
			r.note("spawn: %v", err)
			return r
		}
	}
	if !converged(2 * time.Minute) {
		r.note("the first %d replicas did not converge on the target within 2m", m)
		return r
	}
	log.mu.Lock()
	var last int64
	for _, c := range log.cur {
		last = max(last, c.At)
	}
	log.mu.Unlock()
	r.Converge = time.Duration(last - t0)
	b.progress("partitions · %s: %d replicas converged in %v", st.Name, m, r.Converge.Round(time.Millisecond))

	// leave stops a random replica with sig and waits until all of its
	// partitions run elsewhere.
	leave := func(sig syscall.Signal, timeout time.Duration) (time.Duration, []time.Duration, bool) {
		var victim *partReplica
		pids := make([]int, 0, len(live))
		for pid := range live {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		victim = live[pids[rand.IntN(len(pids))]]
		log.mu.Lock()
		owned := log.runningBy()[victim.p.pid]
		var children []int
		for _, p := range owned {
			children = append(children, log.cur[p].Pid)
		}
		log.mu.Unlock()
		time.Sleep(100*time.Millisecond + rand.N(500*time.Millisecond))
		t0 := mono.Now()
		syscall.Kill(victim.p.pid, sig)
		delete(live, victim.p.pid)
		if sig == syscall.SIGKILL {
			go func() {
				time.Sleep(time.Second)
				orphans := 0
				for _, pid := range children {
					if pidAlive(pid) {
						orphans++
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				log.mu.Lock()
				r.KillOrphans += orphans
				log.mu.Unlock()
			}()
		}
		ok := log.waitFor(timeout, func() bool {
			for _, p := range owned {
				c := log.cur[p]
				if c.At <= t0 || c.Ppid == victim.p.pid {
					return false
				}
			}
			return true
		})
		if !victim.p.wait(30 * time.Second) {
			r.note("the stopped replica %s had not exited 30 s after %v", victim.id, sig)
			victim.p.killGroup(syscall.SIGKILL)
		}
		if !ok {
			return 0, nil, false
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		var worst time.Duration
		var each []time.Duration
		for _, p := range owned {
			d := time.Duration(log.cur[p].At - t0)
			each = append(each, d)
			worst = max(worst, d)
		}
		return worst, each, true
	}
	// join adds a replica and waits until the group converged again.
	join := func() bool {
		before := make([]string, 0, len(live))
		for _, rp := range live {
			before = append(before, rp.id)
		}
		t1 := mono.Now()
		rp, err := spawn()
		if err != nil {
			r.note("spawn: %v", err)
			return false
		}
		if !converged(time.Minute) {
			r.note("no convergence within 1m after %s joined", rp.id)
			return false
		}
		after := append(slices.Clone(before), rp.id)
		tb, ta := elect.Target(group, n, before), elect.Target(group, n, after)
		moved := 0
		for p := range n {
			if tb[p] != ta[p] {
				moved++
			}
		}
		log.mu.Lock()
		var lastOwn int64
		for _, c := range log.cur {
			if c.Ppid == rp.p.pid {
				lastOwn = max(lastOwn, c.At)
			}
		}
		log.mu.Unlock()
		r.Join = append(r.Join, time.Duration(lastOwn-t1))
		r.JoinMoves = append(r.JoinMoves, log.startsAfter(t1))
		r.JoinTargetMoves = append(r.JoinTargetMoves, moved)
		return true
	}

	cycle := func(kind string, sig syscall.Signal, runs int, timeout time.Duration, out, each *[]time.Duration) {
		for run := 0; run < runs && !b.stopping(); run++ {
			d, e, ok := leave(sig, timeout)
			if !ok {
				r.note("%s run %d: the stopped replica's partitions were not all running elsewhere within %v", kind, run, timeout)
				return
			}
			*out = append(*out, d)
			*each = append(*each, e...)
			if !converged(time.Minute) {
				r.note("%s run %d: the %d remaining replicas did not converge within 1m", kind, run, len(live))
				return
			}
			if !join() {
				return
			}
			b.progress("partitions · %s %s run %d/%d: all elsewhere %v, join %v (%d started)", st.Name, kind, run+1, runs,
				d.Round(time.Millisecond), r.Join[len(r.Join)-1].Round(time.Millisecond), r.JoinMoves[len(r.JoinMoves)-1])
		}
	}
	cycle("SIGTERM", syscall.SIGTERM, termRuns, 30*time.Second, &r.Term, &r.TermEach)
	cycle("SIGKILL", syscall.SIGKILL, killRuns, 2*r.TTL+r.Reconcile+30*time.Second, &r.Kill, &r.KillEach)

	time.Sleep(1500 * time.Millisecond) // the orphan checks
	log.mu.Lock()
	defer log.mu.Unlock()
	r.Starts = len(log.starts)
	byPart := map[int][]mark{}
	for _, s := range log.starts {
		if s.Lock == "0" {
			r.LockConflicts++
		}
		byPart[s.Partition] = append(byPart[s.Partition], s)
	}
	for _, ss := range byPart {
		slices.SortFunc(ss, func(a, b mark) int { return cmp.Compare(a.At, b.At) })
		for i := 1; i < len(ss); i++ {
			if stop, ok := log.stopOf(ss[i-1]); ok && stop.At > ss[i].At {
				r.Overlaps++
			}
		}
	}
	return r
}
