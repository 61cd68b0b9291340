package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// The "right" section: leadership that follows the command's health and
// the operators' priorities (issue 47).
//
//   - Health hand-over: three replicas whose health check (benchchild
//     -mode check) fails while DIR/sick-HOLDER exists, at
//     --health-interval 1s --health-retries 2; the benchmark makes the
//     leader sick and measures from the check's first failure (its own
//     CLOCK_MONOTONIC reading) to the successor's child's start.
//   - Preemption: a leader at priority 0, then a replica with --priority 1
//     --preempt --preempt-delay 2s; measured from that replica's "asks the
//     leader to hand over" log line (the delay has passed) to its child's
//     start, and from its standing-by line + the delay.
//   - Store load at rest with the options on: the serverload section's
//     group, with every replica given a priority, one --preempt and a
//     health check, beside the group without them.

const (
	rightInterval = time.Second
	rightRetries  = 2
	// rightCooldown keeps a replica that handed over from being preferred
	// for a while; short, so that the runs go round the three replicas.
	rightCooldown = 3 * time.Second
	preemptDelay  = 2 * time.Second
	// targetHealthMax: interval × retries + a graceful hand-off (§13).
	targetHealthMax = 2500 * time.Millisecond
	targetPreempt   = 100 * time.Millisecond
)

// rightResult is one store's health hand-overs and preemptions.
type rightResult struct {
	Store string
	// Health: the check's first failure → the successor's child start;
	// Sick: the sick file's creation → the same start.
	Health, Sick []time.Duration
	// Preempt: the "asks the leader to hand over" line seen → the
	// preempting replica's child start; Delay: its standing-by line seen
	// + preemptDelay → the same start.
	Preempt, Delay []time.Duration
	// Overlaps: a new child started before the old one recorded its
	// stop; SameReplica: a health hand-over that came back to the sick
	// replica.
	Overlaps, SameReplica, Failed int
	Notes                         []string
}

func (r *rightResult) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *rightResult) verdict() bool {
	return len(r.Health) > 0 && summarize(r.Health).Max <= targetHealthMax && r.Overlaps == 0 &&
		len(r.Preempt) > 0 && summarize(r.Preempt).P50 <= targetPreempt
}

// runRight measures health hand-overs and preemptions on every store.
func (b *bench) runRight(ctx context.Context, rep *report, runs int) {
	for _, st := range b.stores {
		if b.stopping() {
			break
		}
		res := &rightResult{Store: st.Name}
		rep.Right = append(rep.Right, res)
		busy := machineBusy()
		if dsn, err := st.fresh(ctx, "health"); err != nil {
			res.note("%v", err)
		} else {
			b.progress("health hand-over: %s, %d runs", st.Label(), runs)
			b.runHealth(st, dsn, runs, res)
		}
		if dsn, err := st.fresh(ctx, "preempt"); err != nil {
			res.note("%v", err)
		} else {
			b.progress("preemption: %s, %d runs", st.Label(), runs)
			b.runPreempt(st, dsn, runs, res)
		}
		rep.Busy["right "+st.Name] = busy()
	}
}

func (b *bench) runHealth(st *store, dsn string, runs int, res *rightResult) {
	name := fmt.Sprintf("bench-health-%d", rand.IntN(1<<30))
	dir, err := os.MkdirTemp(b.tmp, sanitize(st.Name+"-health")+"-")
	if err != nil {
		res.note("temp dir: %v", err)
		return
	}
	w, err := newWatcher(dir)
	if err != nil {
		res.note("%v", err)
		return
	}
	defer w.close()
	c := b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod,
		"--health-cmd", b.childBin+" -mode check -dir "+dir,
		"--health-interval", rightInterval.String(), "--health-timeout", rightInterval.String(),
		"--health-retries", strconv.Itoa(rightRetries), "--health-cooldown", rightCooldown.String())
	var reps []*proc
	defer func() { stopAll(reps, 15*time.Second) }()
	var cur mark
	for i := range 3 {
		p, err := c.spawn(name, dir, i)
		if err != nil {
			res.note("spawn: %v", err)
			return
		}
		reps = append(reps, p)
		if i > 0 {
			if err := c.standby(name, p, i+1, 30*time.Second); err != nil {
				res.note("standby: %v", err)
				return
			}
			continue
		}
		var ok bool
		if cur, ok = w.nextStart(30 * time.Second); !ok {
			res.note("the first replica's child did not start within 30s")
			return
		}
		b.procs.noteChild(hostPid(cur))
	}
	for run := 0; run < runs && !b.stopping(); run++ {
		// Past the last hand-over's cooldown, so that every other replica
		// is eligible again, at a random phase of the check's interval.
		time.Sleep(rightCooldown + rand.N(rightInterval))
		w.drainStarts()
		sick := filepath.Join(dir, "sick-"+cur.Holder)
		t0 := mono.Now()
		if err := os.WriteFile(sick, nil, 0o644); err != nil {
			res.note("%v", err)
			return
		}
		next, ok := w.nextStart(30 * time.Second)
		os.Remove(sick)
		if !ok {
			res.Failed++
			res.note("run %d: no successor's child within 30s", run)
			return
		}
		b.procs.noteChild(hostPid(next))
		res.Sick = append(res.Sick, time.Duration(next.At-t0))
		if first, ok := firstFailure(dir, cur.Holder, t0); ok {
			res.Health = append(res.Health, time.Duration(next.At-first))
		} else {
			res.note("run %d: no failing check recorded", run)
		}
		if stop, ok := w.stopOf(cur, 5*time.Second); !ok || stop.At > next.At {
			res.Overlaps++
		}
		if next.Holder == cur.Holder {
			res.SameReplica++
		}
		b.progress("%s health run %d/%d: %v", st.Label(), run+1, runs, time.Duration(next.At-t0).Round(time.Millisecond))
		cur = next
	}
}

// firstFailure is the earliest failing check of holder's recorded in dir
// at or after t0.
func firstFailure(dir, holder string, t0 int64) (int64, bool) {
	files, _ := filepath.Glob(filepath.Join(dir, "fail-*"))
	var first int64
	for _, f := range files {
		m, err := readMark(f)
		if err != nil || m.Holder != holder || m.At < t0 {
			continue
		}
		if first == 0 || m.At < first {
			first = m.At
		}
	}
	return first, first != 0
}

func (b *bench) runPreempt(st *store, dsn string, runs int, res *rightResult) {
	for run := 0; run < runs && !b.stopping(); run++ {
		if !b.preemptOnce(st, dsn, run, res) {
			return
		}
	}
}

// preemptOnce starts a leader at priority 0 and then a replica that
// preempts it, and measures the hand-over; it reports whether to go on.
func (b *bench) preemptOnce(st *store, dsn string, run int, res *rightResult) bool {
	name := fmt.Sprintf("bench-preempt-%d", rand.IntN(1<<30))
	dir, err := os.MkdirTemp(b.tmp, sanitize(st.Name+"-preempt")+"-")
	if err != nil {
		res.note("temp dir: %v", err)
		return false
	}
	w, err := newWatcher(dir)
	if err != nil {
		res.note("%v", err)
		return false
	}
	defer w.close()
	var reps []*proc
	defer func() { stopAll(reps, 15*time.Second) }()
	low := b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod)
	p, err := low.spawn(name, dir, 0)
	if err != nil {
		res.note("spawn: %v", err)
		return false
	}
	reps = append(reps, p)
	cur, ok := w.nextStart(30 * time.Second)
	if !ok {
		res.note("run %d: the leader's child did not start within 30s", run)
		return false
	}
	b.procs.noteChild(hostPid(cur))
	const asks = "this replica preempts it"
	q, err := b.procs.start(fmt.Sprintf("preempt-%s-%d", st.Name, run),
		[]string{b.lrBin, "--name", name, "--store", dsn, "--identity", name + "-high", "--log-level", "info",
			"--priority", "1", "--preempt", "--preempt-delay", preemptDelay.String(),
			"--", b.childBin, "-dir", dir, "-mode", "hold", "-lock"}, nil, markStandby, asks)
	if err != nil {
		res.note("spawn: %v", err)
		return false
	}
	reps = append(reps, q)
	if err := q.waitMark(markStandby, 30*time.Second); err != nil {
		res.note("run %d: standby: %v", run, err)
		return false
	}
	standing := mono.Now()
	if err := q.waitMark(asks, 30*time.Second); err != nil {
		res.Failed++
		res.note("run %d: the preempting replica never asked: %v", run, err)
		return false
	}
	asked := mono.Now()
	next, ok := w.nextStart(30 * time.Second)
	if !ok {
		res.Failed++
		res.note("run %d: no preempting child within 30s", run)
		return false
	}
	b.procs.noteChild(hostPid(next))
	res.Preempt = append(res.Preempt, time.Duration(next.At-asked))
	res.Delay = append(res.Delay, time.Duration(next.At-standing)-preemptDelay)
	if stop, ok := w.stopOf(cur, 5*time.Second); !ok || stop.At > next.At {
		res.Overlaps++
	}
	b.progress("%s preemption run %d: %v", st.Label(), run+1, time.Duration(next.At-asked).Round(time.Microsecond))
	return true
}

// rightGroupArgs gives the serverload group's replicas priorities 0, 1
// and 2, a health check that passes, and the last one --preempt (with a
// delay longer than the window, so that the leader stays put).
func rightGroupArgs(i int) []string {
	args := []string{"--priority", strconv.Itoa(i), "--health-cmd", "true"}
	if i == 2 {
		args = append(args, "--preempt", "--preempt-delay", "1h")
	}
	return args
}

// targetRightLoad bounds the store load at rest with priorities and
// health checks, relative to the same group without them (§13).
const targetRightLoad = 1.10

func (r *report) rightSection(w *mdw) {
	if len(r.Right) == 0 {
		return
	}
	w.p("## The right replica: health and preemption")
	w.p("")
	w.p("Health: three replicas with `--health-interval %v --health-retries %d --health-cooldown %v`; the check fails while a", rightInterval, rightRetries, rightCooldown)
	w.p("file names the leader; measured from the check's first failure (its own CLOCK_MONOTONIC reading) to the successor's")
	w.p("child's start (\"sick file →\" adds the wait for the first check, up to one interval). Preemption: a leader at")
	w.p("priority 0, then a replica with `--priority 1 --preempt --preempt-delay %v`; measured from its \"asked the leader", preemptDelay)
	w.p("to hand the name over\" line (read from its log) to its child's start, and from its standing-by line + the delay.")
	w.p("Targets (§13): health ≤ %v at max, 0 overlaps; preemption ≤ %v at p50.", targetHealthMax, targetPreempt)
	w.p("")
	w.p("| system | health runs | failure → successor p50 / max | sick file → successor p50 / max | preemptions | asked → child p50 / max | delay passed → child p50 / max | overlaps | target |")
	w.p("|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Right {
		h, sk, p, d := summarize(s.Health), summarize(s.Sick), summarize(s.Preempt), summarize(s.Delay)
		w.p("| leaderrun · %s | %d | %s / %s ms | %s / %s ms | %d | %s / %s ms | %s / %s ms | %d | %s |", s.Store, h.N,
			ms(h.P50), ms(h.Max), ms(sk.P50), ms(sk.Max), p.N, ms(p.P50), ms(p.Max), ms(d.P50), ms(d.Max), s.Overlaps, met(s.verdict()))
	}
	w.p("")
	if len(r.RightLoad) > 0 {
		w.p("Store load at rest, counted at the server as in the serverload section, for the same group with priorities 0, 1")
		w.p("and 2 (the leader at 0), a passing health check on each, and `--preempt` on the last with a delay of an hour, longer")
		w.p("than the window. Target: at most %.0f %% over the group without them.", (targetRightLoad-1)*100)
		w.p("")
		w.p("| store | without, per s | with, per s | ratio | target |")
		w.p("|---|---|---|---|---|")
		for _, l := range r.RightLoad {
			var base *serverLoad
			for _, b := range r.ServerLoad {
				if b.Store == l.Store {
					base = b
				}
			}
			if base == nil || base.PerSecond() == 0 || l.Err != "" {
				w.p("| %s | | %.2f %s | | not compared: %s |", l.Store, l.PerSecond(), l.Unit, l.Err)
				continue
			}
			ratio := l.PerSecond() / base.PerSecond()
			w.p("| %s | %.2f %s | %.2f %s | %.3f | %s |", l.Store, base.PerSecond(), base.Unit, l.PerSecond(), l.Unit, ratio, met(ratio <= targetRightLoad))
		}
		w.p("")
	}
	for _, s := range r.Right {
		if len(s.Notes) > 0 || s.SameReplica > 0 {
			w.p("- leaderrun · %s: %d health hand-overs came back to the sick replica. Problems: %v. Machine CPU busy: %s.",
				s.Store, s.SameReplica, s.Notes, r.busy("right "+s.Store))
		}
	}
	w.p("")
}
