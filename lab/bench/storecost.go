package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// costResult is the store load of one leader and Followers followers at
// default timings over Window.
type costResult struct {
	Store     string
	Tool      string // "leaderrun" or "etcdctl lock"
	Followers int
	Window    time.Duration
	How       string // what counted the statements
	Unit      string // statements, commands or requests
	// Count is what the server counted over the window (not SQLite).
	Count float64
	// By breaks Count down: by command (MariaDB, Redis) or gRPC method
	// (etcd); Kinds breaks MariaDB's COM_QUERY down by statement.
	By, Kinds map[string]int64
	// PostgreSQL: committed + rolled-back transactions (each statement of
	// the store is its own transaction).
	Xacts int64
	// SQLite: what the leader and the followers did, traced.
	Leader, Follow traced
	// SQLite: read and write transactions, counted from the locks.
	Reads, Writes float64
	// Global is a server-wide counter over the same window, every client's
	// (a cross-check where the server is shared), or "".
	Global string
	Err    string
}

// Label is the system's name in the tables.
func (r *costResult) Label() string {
	if r.Tool == "etcdctl lock" {
		return "etcdctl lock · etcd"
	}
	return "leaderrun · " + r.Store
}

// PerSecond is statements (commands, requests) per second against the store.
func (r *costResult) PerSecond() float64 {
	if r.Window <= 0 {
		return 0
	}
	if r.Store == "SQLite" {
		return (r.Reads + r.Writes) / r.Window.Seconds()
	}
	return r.Count / r.Window.Seconds()
}

// sqliteCalibration checks the transaction count of strace's lock trace
// against operations of the SQLite store that are known: per Get (a read)
// and per Renew (a write), the transactions and write transactions it
// counted. Both should be 1 transaction, with 0 and 1 writes.
type sqliteCalibration struct {
	TxnsPerRead, WritesPerRead   float64
	TxnsPerWrite, WritesPerWrite float64
	Err                          string
}

// group is one leader and its followers, all leaderrun processes.
type group struct {
	leader    *proc
	followers []*proc
	all       []*proc
}

func (g *group) stop() { stopAll(g.all, 10*time.Second) }

// startGroup starts one leaderrun replica, waits for its child, then
// starts followers more and waits until each stands by.
func (b *bench) startGroup(label, dsn string, followers int) (*group, error) {
	return b.startGroupOf(b.leaderrunContender(label, "", dsn, 15*time.Second, 2*time.Second), label, followers)
}

// startGroupOf is startGroup for any contender.
func (b *bench) startGroupOf(c *contender, label string, followers int) (*group, error) {
	dir, err := os.MkdirTemp(b.tmp, sanitize(label)+"-")
	if err != nil {
		return nil, err
	}
	w, err := newWatcher(dir)
	if err != nil {
		return nil, err
	}
	defer w.close()
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
	b.procs.noteChild(hostPid(m))
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
func (b *bench) sqliteCost(followers int, window time.Duration) *costResult {
	r := &costResult{Store: "SQLite", Tool: "leaderrun", Followers: followers, Unit: "statements",
		How: "strace -f of the leaderrun processes: transactions counted from the WAL index's locks"}
	path := b.tmpPath(fmt.Sprintf("cost-%d.db", followers))
	g, err := b.startGroup(fmt.Sprintf("cost-sqlite-%d", followers), "sqlite:"+path, followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	b.sleep(3 * time.Second) // past start-up
	type out struct {
		t   traced
		d   time.Duration
		err error
	}
	lc, fc := make(chan out, 1), make(chan out, 1)
	go func() {
		t, d, err := b.straceAttach(fmt.Sprintf("cost-%d-leader", followers), []int{g.leader.pid}, window)
		lc <- out{t, d, err}
	}()
	go func() {
		var pids []int
		for _, p := range g.followers {
			pids = append(pids, p.pid)
		}
		t, d, err := b.straceAttach(fmt.Sprintf("cost-%d-followers", followers), pids, window)
		fc <- out{t, d, err}
	}()
	lo, fo := <-lc, <-fc
	if lo.err != nil || fo.err != nil {
		r.Err = fmt.Sprint("strace: ", lo.err, " ", fo.err)
		return r
	}
	r.Leader, r.Follow = lo.t, fo.t
	r.Window = (lo.d + fo.d) / 2
	r.Writes = float64(lo.t.Writes + fo.t.Writes)
	r.Reads = float64(lo.t.Reads() + fo.t.Reads())
	return r
}

// pgCost measures one PostgreSQL group in a database of its own, from the
// deltas of pg_stat_database.
func (b *bench) pgCost(ctx context.Context, st *store, followers int, window time.Duration) *costResult {
	r := &costResult{Store: "PostgreSQL", Tool: "leaderrun", Followers: followers, Unit: "statements",
		How: "Δ(xact_commit + xact_rollback) in pg_stat_database of a database used only by this group"}
	dsn, err := st.fresh(ctx, fmt.Sprintf("cost_%d", followers))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	db := strings.TrimPrefix(dsn[strings.LastIndex(dsn, "/"):], "/")
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	g, err := b.startGroup(fmt.Sprintf("cost-pg-%d", followers), dsn, followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
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
	r.Count = float64(r.Xacts)
	return r
}

// mysqlCost measures one MariaDB group in a database of its own, through
// a counting proxy of its own: the commands this group's connections sent.
func (b *bench) mysqlCost(ctx context.Context, st *store, followers int, window time.Duration) *costResult {
	r := &costResult{Store: "MariaDB", Tool: "leaderrun", Followers: followers, Unit: "statements",
		How: "COM_QUERY + COM_STMT_EXECUTE packets the group's connections sent, counted by a proxy in front of the server"}
	dsn, err := st.fresh(ctx, fmt.Sprintf("cost_%d", followers))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	u, err := url.Parse(dsn)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "3306")
	}
	pc, err := startMySQLCounter(target)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer pc.close()
	u.Host = pc.addr()
	via := u.String()
	g, err := b.startGroup(fmt.Sprintf("cost-mysql-%d", followers), via, followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	b.sleep(12 * time.Second)
	c0, k0 := pc.snapshot()
	q0, _ := b.mysql.globalStatus(ctx)
	t0 := mono.Now()
	b.sleep(window)
	c1, k1 := pc.snapshot()
	r.Window = mono.Since(t0)
	q1, _ := b.mysql.globalStatus(ctx)
	r.By, r.Kinds = diffCounts(c0, c1), diffCounts(k0, k1)
	r.Count = float64(r.By["COM_QUERY"] + r.By["COM_STMT_EXECUTE"])
	if q0 != nil && q1 != nil {
		r.Global = fmt.Sprintf("server-wide Questions over the window: %.2f/s (every client's)", float64(q1["Questions"]-q0["Questions"])/r.Window.Seconds())
	}
	return r
}

// redisCost measures one Redis group under a key prefix of its own, from
// the server's MONITOR feed: the commands executed for this group's
// connections (told apart by their client name).
func (b *bench) redisCost(ctx context.Context, st *store, mon *redisMonitor, followers int, window time.Duration) *costResult {
	r := &costResult{Store: "Redis", Tool: "leaderrun", Followers: followers, Unit: "commands",
		How: "commands the server executed for the group's connections, from MONITOR (a script counts once)"}
	dsn, err := st.fresh(ctx, fmt.Sprintf("cost_%d", followers))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	u, _ := url.Parse(dsn)
	name := u.Query().Get("client_name")
	g, err := b.startGroup(fmt.Sprintf("cost-redis-%d", followers), dsn, followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	b.sleep(12 * time.Second)
	addrs := map[string]bool{}
	poll := func() {
		got, err := b.redis.clientAddrs(ctx, name)
		if err == nil {
			for _, a := range got {
				addrs[a] = true
			}
		}
	}
	poll()
	c0 := mon.of(addrs)
	s0, _ := b.redis.commandStats(ctx)
	t0 := mono.Now()
	for mono.Since(t0) < window && !b.stopping() {
		b.sleep(min(2*time.Second, window-mono.Since(t0)))
		poll()
	}
	r.Window = mono.Since(t0)
	// c0 counted only the addresses known at the start; a connection
	// first seen later counts from 0, and started after t0 as it opened
	// after the first poll.
	c1 := mon.of(addrs)
	s1, _ := b.redis.commandStats(ctx)
	r.By = diffCounts(c0, c1)
	r.Count = float64(sumCounts(r.By))
	if s0 != nil && s1 != nil {
		r.Global = fmt.Sprintf("server-wide INFO commandstats calls over the window: %.2f/s (every client's)", float64(sumCounts(diffCounts(s0, s1)))/r.Window.Seconds())
	}
	return r
}

// etcdCost measures one group on the benchmark's etcd cluster, from the
// members' gRPC metrics. The cluster is shared by the groups, so they run
// one at a time, with nothing else on the cluster.
func (b *bench) etcdCost(ctx context.Context, c *contender, followers int, window time.Duration) *costResult {
	r := &costResult{Store: "etcd", Tool: c.Tool, Followers: followers, Unit: "requests",
		How: "Δ grpc_server_msg_received_total summed over the three members (a unary call is one, a keep-alive or watch message on a stream is one)"}
	g, err := b.startGroupOf(c, fmt.Sprintf("cost-%s-%d", sanitize(c.Label), followers), followers)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	b.sleep(5 * time.Second)
	m0, err := b.etcdSrv.requests()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	t0 := mono.Now()
	b.sleep(window)
	m1, err := b.etcdSrv.requests()
	r.Window = mono.Since(t0)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.By = map[string]int64{}
	for k, v := range m1 {
		if d := int64(v - m0[k]); d != 0 {
			r.By[k] = d
		}
	}
	r.Count = float64(sumCounts(r.By))
	return r
}

// calibration is this run's SQLite calibration, made on first use.
func (b *bench) calibration() sqliteCalibration {
	b.calOnce.Do(func() {
		if b.strace == "" {
			b.cal.Err = "strace is not on PATH"
			return
		}
		b.cal = b.calibrateSQLite()
	})
	return b.cal
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
	dir, err := os.MkdirTemp(b.tmp, "calib-")
	if err != nil {
		cal.Err = err.Error()
		return cal
	}
	run := func(op string, n int) (traced, error) {
		out := b.tmpPath(fmt.Sprintf("calib-%s-%d.strace", op, n))
		db := filepath.Join(dir, fmt.Sprintf("calib-%s-%d.db", op, n))
		p, err := b.procs.start("calib-"+op, []string{b.strace, "-f", "-e", "trace=" + straceSyscalls, "-o", out, self,
			"-calib-sqlite", db, "-calib-op", op, "-calib-n", strconv.Itoa(n)}, nil)
		if err != nil {
			return traced{}, err
		}
		if !p.wait(60 * time.Second) {
			p.killGroup(syscall.SIGKILL)
			return traced{}, fmt.Errorf("calibration did not finish")
		}
		if !p.cmd.ProcessState.Success() {
			return traced{}, fmt.Errorf("calibration failed: see %s", filepath.Join(b.procs.logDir, "calib-"+op+".log"))
		}
		return parseStraceTrace(out)
	}
	const lo, hi = 20, 220
	per := func(op string) (txns, writes float64, err error) {
		a, err := run(op, lo)
		if err != nil {
			return 0, 0, err
		}
		z, err := run(op, hi)
		if err != nil {
			return 0, 0, err
		}
		n := (z.Reads() + z.Writes) - (a.Reads() + a.Writes)
		return float64(n) / (hi - lo), float64(z.Writes-a.Writes) / (hi - lo), nil
	}
	if cal.TxnsPerRead, cal.WritesPerRead, err = per("read"); err != nil {
		cal.Err = err.Error()
		return cal
	}
	if cal.TxnsPerWrite, cal.WritesPerWrite, err = per("write"); err != nil {
		cal.Err = err.Error()
	}
	return cal
}
