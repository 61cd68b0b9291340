package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bench/internal/mono"
)

// costResult is the store load of one leader and Followers followers at
// default timings over Window.
type costResult struct {
	Store     string
	Followers int
	Window    time.Duration
	How       string // what counted the statements
	// PostgreSQL: committed + rolled-back transactions (each statement of
	// the store is its own transaction).
	Xacts int64
	// SQLite: system calls of the leader and of the followers.
	Leader, Follow syscallCounts
	// SQLite estimate, from the calibration.
	Reads, Writes float64
	Err           string
}

// PerSecond is statements (transactions) per second against the store.
func (r *costResult) PerSecond() float64 {
	if r.Window <= 0 {
		return 0
	}
	if r.Store == "PostgreSQL" {
		return float64(r.Xacts) / r.Window.Seconds()
	}
	return (r.Reads + r.Writes) / r.Window.Seconds()
}

// sqliteCalibration is how many system calls one store operation costs, on
// a connection that stays open, measured in this run.
type sqliteCalibration struct {
	FcntlPerRead, FcntlPerWrite float64
	FsyncPerRead, FsyncPerWrite float64
	Err                         string
}

// group is one leader and its followers, all leaderrun processes.
type group struct {
	leader    *proc
	followers []*proc
	all       []*proc
}

func (g *group) stop() {
	for _, p := range g.all {
		p.killGroup(syscall.SIGTERM)
	}
	for _, p := range g.all {
		if !p.wait(10 * time.Second) {
			p.killGroup(syscall.SIGKILL)
			p.wait(5 * time.Second)
		}
	}
}

// startGroup starts one leaderrun replica, waits for its child, then
// starts followers more and waits until each stands by.
func (b *bench) startGroup(label, dsn string, followers int) (*group, error) {
	dir, err := os.MkdirTemp(b.tmp, sanitize(label)+"-")
	if err != nil {
		return nil, err
	}
	w, err := newWatcher(dir)
	if err != nil {
		return nil, err
	}
	defer w.close()
	c := b.leaderrunContender(label, "", dsn, 15*time.Second, 2*time.Second)
	g := &group{}
	name := "bench-cost"
	p, err := c.spawn(name, dir, 0)
	if err != nil {
		return nil, err
	}
	g.leader = p
	g.all = append(g.all, p)
	m, ok := w.nextStart(30 * time.Second)
	if !ok {
		g.stop()
		return nil, fmt.Errorf("%s: the leader's child did not start", label)
	}
	b.procs.noteChild(m.Pid)
	for i := 1; i <= followers; i++ {
		p, err := c.spawn(name, dir, i)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.followers = append(g.followers, p)
		g.all = append(g.all, p)
		if err := c.standby(name, p, i+1, 30*time.Second); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

// sqliteCost measures one SQLite group with strace.
func (b *bench) sqliteCost(followers int, window time.Duration, cal sqliteCalibration) *costResult {
	r := &costResult{Store: "SQLite", Followers: followers,
		How: "strace -c -f of the leaderrun processes; statements estimated from fcntl and fsync counts with the calibration"}
	path := b.tmpPath(fmt.Sprintf("cost-%d.db", followers))
	g, err := b.startGroup(fmt.Sprintf("cost-sqlite-%d", followers), "sqlite:"+path, followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	b.sleep(3 * time.Second) // past start-up
	type out struct {
		c   syscallCounts
		d   time.Duration
		err error
	}
	lc, fc := make(chan out, 1), make(chan out, 1)
	go func() {
		c, d, err := b.straceAttach(fmt.Sprintf("cost-%d-leader", followers), []int{g.leader.pid}, window)
		lc <- out{c, d, err}
	}()
	go func() {
		var pids []int
		for _, p := range g.followers {
			pids = append(pids, p.pid)
		}
		c, d, err := b.straceAttach(fmt.Sprintf("cost-%d-followers", followers), pids, window)
		fc <- out{c, d, err}
	}()
	lo, fo := <-lc, <-fc
	if lo.err != nil || fo.err != nil {
		r.Err = fmt.Sprint("strace: ", lo.err, " ", fo.err)
		return r
	}
	r.Leader, r.Follow = lo.c, fo.c
	r.Window = (lo.d + fo.d) / 2
	// Writes: each commit under synchronous=FULL in WAL mode syncs the WAL
	// once (calibrated below); reads are the remaining lock operations.
	fs := float64(lo.c.fsyncs() + fo.c.fsyncs())
	fc2 := float64(lo.c["fcntl"] + fo.c["fcntl"])
	if cal.FsyncPerWrite > 0 && cal.FcntlPerRead > 0 {
		r.Writes = fs / cal.FsyncPerWrite
		r.Reads = max(0, (fc2-r.Writes*cal.FcntlPerWrite)/cal.FcntlPerRead)
	}
	return r
}

// pgCost measures one PostgreSQL group in a database of its own, from the
// deltas of pg_stat_database.
func (b *bench) pgCost(ctx context.Context, followers int, window time.Duration) *costResult {
	r := &costResult{Store: "PostgreSQL", Followers: followers,
		How: "Δ(xact_commit + xact_rollback) in pg_stat_database of a database used only by this group"}
	db := fmt.Sprintf("lrbench_%d_cost_%d", os.Getpid(), followers)
	if err := b.pg.createDB(ctx, db); err != nil {
		r.Err = err.Error()
		return r
	}
	defer b.pg.dropDB(context.Background(), db)
	dsn := b.pg.dsnFor(db)
	var stop func()
	if b.pgCLI {
		g, err := b.startGroup(fmt.Sprintf("cost-pg-%d", followers), dsn, followers)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		stop = g.stop
	} else {
		r.How += "; replicas are in-process lease.Electors, each with its own Store (the leaderrun binary has no PostgreSQL store)"
		reps, err := startInproc(ctx, dsn, "bench-cost", followers+1)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		stop = reps.stop
	}
	defer stop()
	b.sleep(12 * time.Second) // past start-up, and past the statistics' idle flush
	x0, err := b.pg.xacts(ctx, db)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	t0 := mono.Now()
	b.sleep(window)
	x1, err := b.pg.xacts(ctx, db)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Window = mono.Since(t0)
	r.Xacts = x1 - x0
	return r
}

// calibrateSQLite runs this program's -calib-sqlite mode under strace
// twice, with few and with many operations, and divides the differences.
func (b *bench) calibrateSQLite() sqliteCalibration {
	var cal sqliteCalibration
	self, err := os.Executable()
	if err != nil {
		cal.Err = err.Error()
		return cal
	}
	run := func(op string, n int) (syscallCounts, error) {
		out := b.tmpPath(fmt.Sprintf("calib-%s-%d.strace", op, n))
		db := b.tmpPath(fmt.Sprintf("calib-%s-%d.db", op, n))
		p, err := b.procs.start("calib-"+op, []string{b.strace, "-f", "-c", "-o", out, self,
			"-calib-sqlite", db, "-calib-op", op, "-calib-n", strconv.Itoa(n)}, nil)
		if err != nil {
			return nil, err
		}
		if !p.wait(60 * time.Second) {
			p.killGroup(syscall.SIGKILL)
			return nil, fmt.Errorf("calibration did not finish")
		}
		if !p.cmd.ProcessState.Success() {
			return nil, fmt.Errorf("calibration failed: see %s", filepath.Join(b.procs.logDir, "calib-"+op+".log"))
		}
		return parseStraceSummary(out)
	}
	const lo, hi = 20, 220
	per := func(op string) (fcntl, fsync float64, err error) {
		a, err := run(op, lo)
		if err != nil {
			return 0, 0, err
		}
		z, err := run(op, hi)
		if err != nil {
			return 0, 0, err
		}
		return float64(z["fcntl"]-a["fcntl"]) / (hi - lo), float64(z.fsyncs()-a.fsyncs()) / (hi - lo), nil
	}
	if cal.FcntlPerRead, cal.FsyncPerRead, err = per("read"); err != nil {
		cal.Err = err.Error()
		return cal
	}
	if cal.FcntlPerWrite, cal.FsyncPerWrite, err = per("write"); err != nil {
		cal.Err = err.Error()
	}
	return cal
}
