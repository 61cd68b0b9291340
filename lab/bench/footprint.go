package main

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// idleResult is the footprint of one idle leaderrun process.
type idleResult struct {
	Store, Role string
	RSSKB       int64 // VmRSS at the end of the window
	AnonKB      int64 // RssAnon: the process's own memory
	FileKB      int64 // RssFile: mapped file pages, mostly the binary's, shared through the page cache
	HWMKB       int64 // VmHWM: the peak RSS since start
	CPU         time.Duration
	Window      time.Duration
	Err         string
}

// CPUPercent is CPU time over the window, in percent of one core.
func (r idleResult) CPUPercent() float64 {
	if r.Window <= 0 {
		return 0
	}
	return 100 * r.CPU.Seconds() / r.Window.Seconds()
}

// measureIdle starts a leader and a standby on dsn at default timings and
// samples both over window.
func (b *bench) measureIdle(store, dsn string, window time.Duration) []idleResult {
	g, err := b.startGroup("idle-"+store, dsn, 1)
	if err != nil {
		return []idleResult{{Store: store, Role: "leader", Err: err.Error()}}
	}
	defer g.stop()
	b.sleep(3 * time.Second)
	roles := []struct {
		role string
		p    *proc
	}{{"leader", g.leader}, {"standby", g.followers[0]}}
	c0 := make([]time.Duration, len(roles))
	for i, r := range roles {
		c0[i], _ = cpuTime(r.p.pid)
	}
	t0 := mono.Now()
	b.sleep(window)
	d := mono.Since(t0)
	var out []idleResult
	for i, r := range roles {
		res := idleResult{Store: store, Role: r.role, Window: d}
		c1, err := cpuTime(r.p.pid)
		if err != nil {
			res.Err = err.Error()
		}
		res.CPU = c1 - c0[i]
		res.RSSKB, _ = statusKB(r.p.pid, "VmRSS")
		res.HWMKB, _ = statusKB(r.p.pid, "VmHWM")
		res.AnonKB, _ = statusKB(r.p.pid, "RssAnon")
		res.FileKB, _ = statusKB(r.p.pid, "RssFile")
		out = append(out, res)
	}
	return out
}

// execResult compares leaderrun --once starting an uncontested child, in
// its default mode and with --pid-namespace=false, with starting the same
// child directly.
type execResult struct {
	Via, Direct []time.Duration
	// ViaNoNS: Via with --pid-namespace=false, the baseline of the
	// namespace's cost.
	ViaNoNS []time.Duration
	// Total: spawn of leaderrun → leaderrun exited (campaign, child,
	// release); TotalNoNS with --pid-namespace=false.
	Total, TotalNoNS []time.Duration
	Err              string
}

// measureStartToExec interleaves runs of `leaderrun --once -- child` on an
// SQLite file that already exists, in the default mode and with
// --pid-namespace=false, with runs of the child alone.
func (b *bench) measureStartToExec(runs int) *execResult {
	r := &execResult{}
	dir, err := os.MkdirTemp(b.tmp, "exec-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	w, err := newWatcher(dir)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer w.close()
	dsn := "sqlite:" + b.tmpPath("exec.db")
	argv := func(ns string) []string {
		return []string{b.lrBin, "--name", "bench-exec", "--store", dsn, "--once", "--log-level", "warn",
			"--pid-namespace=" + ns, "--", b.childBin, "-dir", dir, "-mode", "exit"}
	}
	if _, _, err := b.startOnce(argv("true"), w); err != nil { // creates the file and table
		r.Err = err.Error()
		return r
	}
	for i := 0; i < runs && !b.stopping(); i++ {
		// The two modes take turns going first.
		modes := []bool{i%2 == 0, i%2 != 0}
		for _, ns := range modes {
			via, total, err := b.startOnce(argv(fmt.Sprint(ns)), w)
			if err != nil {
				r.Err = err.Error()
				return r
			}
			if ns {
				r.Via, r.Total = append(r.Via, via), append(r.Total, total)
			} else {
				r.ViaNoNS, r.TotalNoNS = append(r.ViaNoNS, via), append(r.TotalNoNS, total)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if d, err := b.directStart(dir, w); err == nil {
			r.Direct = append(r.Direct, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// startOnce runs argv, a `leaderrun --once` whose child records in w's
// directory, and returns the times from just before its fork to the
// child's start reading and to leaderrun's exit.
func (b *bench) startOnce(argv []string, w *watcher) (toExec, toExit time.Duration, err error) {
	t0 := mono.Now()
	p, err := b.procs.start("exec-leaderrun", argv, nil)
	if err != nil {
		return 0, 0, err
	}
	m, ok := w.nextStart(10 * time.Second)
	if !p.wait(10 * time.Second) {
		p.killGroup(syscall.SIGKILL)
		return 0, 0, fmt.Errorf("leaderrun --once did not exit")
	}
	if !ok {
		return 0, 0, fmt.Errorf("leaderrun --once started no child (exit %v)", p.cmd.ProcessState)
	}
	return time.Duration(m.At - t0), time.Duration(p.exitAt - t0), nil
}
