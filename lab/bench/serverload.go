package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// The "serverload" section: one leader and two followers of leaderrun per
// store, at default timings with a `sleep` child, and the store's load
// counted where the server counts it, not at a client-side proxy:
//
//   - PostgreSQL: Δ(xact_commit + xact_rollback) of a database only the
//     group uses, read from the maintenance database;
//   - MariaDB: Δ Com_* global status of a private mariadbd the section
//     starts (nothing else talks to it);
//   - Redis: INFO commandstats of a private redis-server, after CONFIG
//     RESETSTAT;
//   - etcd: the benchmark's own cluster's gRPC metrics and committed raft
//     proposals.
//
// Where the server can say which statement came from which connection (a
// statement log), the section also attributes the statements to the
// replicas, through the connections' client ports.

// serverSettle is how long a group runs before the window opens: past
// start-up, and past PostgreSQL's statistics flush delay. A backend that
// finds the shared statistics busy keeps its counts for up to 60 s
// (PostgreSQL 15's PGSTAT_MAX_INTERVAL): with a 20 s settle on a loaded
// machine, 4 to 10 of the replicas' start-up transactions landed in the
// window (65 and 66 counted where the server's log had 56 statements).
const serverSettle = 65 * time.Second

// serverLoad is one store's load for one leader and two followers.
type serverLoad struct {
	Store  string
	Window time.Duration
	Settle time.Duration
	How    string
	Unit   string // transactions, statements, commands, requests
	// Count is what the server counted over the window.
	Count int64
	// By breaks Count down as the server does (by Com_* counter, command
	// or gRPC method), per window.
	By map[string]int64
	// Stmts are the statements the server logged over the window, by
	// replica ("leader", "follower 1", ...) and statement kind; empty when
	// the server has no log the benchmark can read.
	Stmts map[string]int64
	// Extra are further counters of the window (raft proposals, ...).
	Extra map[string]int64
	Note  string
	Err   string
}

// PerSecond is Count per second of the window.
func (s *serverLoad) PerSecond() float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(s.Count) / s.Window.Seconds()
}

// serverGroup is the section's three replicas.
type serverGroup struct {
	procs []*proc // leader first
}

func (g *serverGroup) stop() {
	for _, p := range g.procs {
		syscall.Kill(p.pid, syscall.SIGTERM)
	}
	for _, p := range g.procs {
		if !p.wait(15 * time.Second) {
			p.killGroup(syscall.SIGKILL)
			p.wait(5 * time.Second)
		}
	}
}

// role is "leader" or "follower N" for the replica with leaderrun pid pid.
func (g *serverGroup) role(pid int) string {
	for i, p := range g.procs {
		if p.pid == pid {
			if i == 0 {
				return "leader"
			}
			return fmt.Sprintf("follower %d", i)
		}
	}
	return "?"
}

// startServerGroup starts the leader, waits until it is elected, then two
// followers, each until it stands by. Default timings; the child is sleep.
func (b *bench) startServerGroup(label, dsn string) (*serverGroup, error) {
	sleep := lookPath("sleep")
	if sleep == "" {
		return nil, fmt.Errorf("sleep is not on PATH")
	}
	g := &serverGroup{}
	for i := 0; i < 3; i++ {
		argv := []string{b.lrBin, "--name", "bench-serverload", "--store", dsn, "--log-level", "info"}
		if b.groupArgs != nil {
			argv = append(argv, b.groupArgs(i)...)
		}
		argv = append(argv, "--", sleep, "1000000")
		p, err := b.procs.start(fmt.Sprintf("serverload-%s-%d", label, i), argv, nil, markStandby, markElected)
		if err != nil {
			g.stop()
			return nil, err
		}
		g.procs = append(g.procs, p)
		mark := markStandby
		if i == 0 {
			mark = markElected
		}
		if err := p.waitMark(mark, 60*time.Second); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

// serverLoads measures every networked store at once (each counts on a
// server or database of its own).
func (b *bench) serverLoads(ctx context.Context, window time.Duration) []*serverLoad {
	var fs []func() *serverLoad
	if b.pg != nil && b.storeOf("PostgreSQL") != nil {
		fs = append(fs, func() *serverLoad { return b.pgServerLoad(ctx, window) })
	}
	if lookPath("mariadbd") != "" && lookPath("mariadb-install-db") != "" {
		fs = append(fs, func() *serverLoad { return b.mysqlServerLoad(ctx, window) })
	}
	if lookPath("redis-server") != "" {
		fs = append(fs, func() *serverLoad { return b.redisServerLoad(ctx, window) })
	}
	if b.etcdSrv != nil {
		fs = append(fs, func() *serverLoad { return b.etcdServerLoad(window) })
	}
	out := make([]*serverLoad, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = f() }()
	}
	wg.Wait()
	return out
}

// window waits settle, calls before, waits window, calls after, and
// returns the window's length as measured.
func (b *bench) serverWindow(settle, window time.Duration, before, after func()) time.Duration {
	b.sleep(settle)
	before()
	t0 := mono.Now()
	b.sleep(window)
	after()
	return mono.Since(t0)
}

// pgLogPath is where Debian's PostgreSQL writes its log (stderr, no
// logging collector); the statement breakdown needs it readable.
var pgLogPath = "/var/log/postgresql/postgresql-15-main.log"

func (b *bench) pgServerLoad(ctx context.Context, window time.Duration) *serverLoad {
	r := &serverLoad{Store: "PostgreSQL", Unit: "transactions", Settle: serverSettle,
		How: "Δ(xact_commit + xact_rollback) in pg_stat_database of a database only this group used, read from the maintenance database"}
	db := scopeName("serverload")
	if err := b.pg.createDB(ctx, db); err != nil {
		r.Err = err.Error()
		return r
	}
	// Every statement of the group's connections goes to the server's
	// log: the setting is the database's, so no other database's are.
	b.pg.mu.Lock()
	_, err := b.pg.conn.Exec(ctx, "ALTER DATABASE "+quotePG(db)+" SET log_statement = 'all'")
	b.pg.mu.Unlock()
	if err != nil {
		r.Note = "log_statement not set: " + err.Error()
	}
	g, err := b.startServerGroup("pg", b.pg.dsnFor(db))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	var x0, x1, off0 int64
	var e0, e1 error
	var w0, w1 time.Time
	r.Window = b.serverWindow(serverSettle, window,
		func() { off0 = fileSize(pgLogPath); x0, e0 = b.pg.xacts(ctx, db); w0 = time.Now() },
		func() { x1, e1 = b.pg.xacts(ctx, db); w1 = time.Now() })
	if e0 != nil || e1 != nil {
		r.Err = fmt.Sprint(e0, e1)
		return r
	}
	r.Count = x1 - x0
	r.Extra = map[string]int64{}
	// Which backend serves which replica: its client port, owned by a
	// leaderrun process's socket.
	ports := replicaPorts(g)
	b.pg.mu.Lock()
	rows, err := b.pg.conn.Query(ctx, `SELECT pid, coalesce(client_port, 0) FROM pg_stat_activity WHERE datname = $1`, db)
	backends := map[string]string{}
	if err == nil {
		for rows.Next() {
			var pid, port int
			if rows.Scan(&pid, &port) == nil {
				backends[strconv.Itoa(pid)] = ports[port]
			}
		}
		rows.Close()
	}
	b.pg.mu.Unlock()
	r.Stmts, err = pgLoggedStatements(pgLogPath, off0, db, backends)
	if err != nil && r.Note == "" {
		r.Note = "no statement breakdown: " + err.Error()
	}
	// Autovacuum's workers commit transactions in the database too, and
	// log_statement does not show them: read what they did, from inside
	// the database, now that the window is over and the log was read.
	if c, err := pgx.Connect(ctx, b.pg.dsnFor(db)); err == nil {
		var runs, inWindow int64
		err := c.QueryRow(ctx, `SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0),
	count(*) FILTER (WHERE last_autovacuum BETWEEN $1 AND $2) + count(*) FILTER (WHERE last_autoanalyze BETWEEN $1 AND $2)
FROM pg_stat_all_tables`, w0, w1).Scan(&runs, &inWindow)
		c.Close(ctx)
		if err == nil {
			r.Extra["autovacuum and autoanalyze runs on the database's tables since it was made"] = runs
			r.Extra["tables whose last autovacuum or autoanalyze fell in the window"] = inWindow
		}
	}
	if len(r.Stmts) > 0 {
		r.Extra["statements the group's connections sent, from the server's log (log_statement)"] = sumCounts(r.Stmts)
	}
	return r
}

func quotePG(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

var pgLogLine = regexp.MustCompile(`\[(\d+)\] \S+@(\S+) LOG:  (?:statement|execute [^:]*): (.*)`)

// pgLoggedStatements counts the statements db's backends logged from
// offset on, by replica and statement kind. Lines logged after the
// window's end (the log is read a little later) are not told apart: the
// count can exceed the window's by the statements of a second or so.
func pgLoggedStatements(path string, off int64, db string, backends map[string]string) (map[string]int64, error) {
	out := map[string]int64{}
	err := eachLine(path, off, func(line string) {
		m := pgLogLine.FindStringSubmatch(line)
		if m == nil || m[2] != db {
			return
		}
		who := backends[m[1]]
		if who == "" {
			who = "backend " + m[1]
		}
		out[who+": "+stmtKind(m[3])]++
	})
	return out, err
}

// eachLine calls f with each line of the file at path from offset off on.
func eachLine(path string, off int64, f func(line string)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.Seek(off, 0); err != nil {
		return err
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	return sc.Err()
}

// stmtKind is a statement's first words, enough to tell the store's
// statements apart.
func stmtKind(q string) string {
	f := strings.Fields(q)
	if len(f) > 3 {
		f = f[:3]
	}
	k := strings.Join(f, " ")
	if i := strings.IndexByte(k, '('); i > 0 {
		k = k[:i] // a call's arguments differ by replica
	}
	return k
}

// replicaPorts maps each local TCP port of a socket the group's leaderrun
// processes hold to the replica's role.
func replicaPorts(g *serverGroup) map[int]string {
	inodes := map[string]string{} // socket inode → role
	for _, p := range g.procs {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = g.role(p.pid)
			}
		}
	}
	out := map[int]string{}
	for _, tab := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(tab)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[0] == "sl" {
				continue
			}
			role, ok := inodes[fs[9]]
			if !ok {
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			if port, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				out[int(port)] = role
			}
		}
		f.Close()
	}
	return out
}

// startPrivate starts a server process the section owns and waits until
// ready reports nil.
func (b *bench) startPrivate(label string, argv []string, ready func() error) (*proc, error) {
	p, err := b.procs.start(label, argv, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready()
		if err == nil {
			return p, nil
		}
		if p.exited() || time.Now().After(deadline) || b.stopping() {
			p.killGroup(syscall.SIGKILL)
			p.wait(5 * time.Second)
			return nil, fmt.Errorf("%s did not start (%v); see its log in %s", label, err, b.procs.logDir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *bench) mysqlServerLoad(ctx context.Context, window time.Duration) *serverLoad {
	r := &serverLoad{Store: "MariaDB", Unit: "statements", Settle: serverSettle,
		How: "Δ Questions + Δ Com_admin_commands (pings) of a private mariadbd that only this group used, the reading's own SHOW STATUS left out; Com_* also count the statements inside the store's procedures"}
	dir, err := os.MkdirTemp(b.tmp, "mariadb-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	inst := exec1(lookPath("mariadb-install-db"), "--no-defaults", "--datadir="+dir, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if inst != nil {
		r.Err = "mariadb-install-db: " + inst.Error()
		return r
	}
	port, err := freePort()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	logFile := filepath.Join(dir, "general.log")
	base := fmt.Sprintf("mysql://root@127.0.0.1:%d/", port)
	var admin *sql.DB
	srv, err := b.startPrivate("serverload-mariadbd", []string{lookPath("mariadbd"), "--no-defaults", "--datadir=" + dir,
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--socket=" + filepath.Join(dir, "sock"),
		"--pid-file=" + filepath.Join(dir, "pid"), "--user=root", "--skip-log-bin",
		"--innodb-buffer-pool-size=32M", "--performance-schema=OFF", "--general-log=1", "--general-log-file=" + logFile},
		func() error {
			db, err := mysqltest.Admin(base)
			if err != nil {
				return err
			}
			if err := db.PingContext(ctx); err != nil {
				db.Close()
				return err
			}
			admin = db
			return nil
		})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer func() { srv.killGroup(syscall.SIGTERM); srv.wait(30 * time.Second) }()
	defer admin.Close()
	admin.SetMaxOpenConns(1)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE lrbench"); err != nil {
		r.Err = err.Error()
		return r
	}
	g, err := b.startServerGroup("mariadb", mysqltest.WithDatabase(base, "lrbench"))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	status := func() map[string]int64 {
		rows, err := admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR Variable_name LIKE 'Com\\_%'")
		if err != nil {
			return nil
		}
		defer rows.Close()
		m := map[string]int64{}
		for rows.Next() {
			var k, v string
			if rows.Scan(&k, &v) == nil {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n != 0 {
					m[k] = n
				}
			}
		}
		return m
	}
	var s0, s1 map[string]int64
	var off0 int64
	r.Window = b.serverWindow(serverSettle, window,
		func() { off0 = fileSize(logFile); s0 = status() },
		func() { s1 = status() })
	if s0 == nil || s1 == nil {
		r.Err = "SHOW GLOBAL STATUS failed"
		return r
	}
	r.By = map[string]int64{}
	for k, v := range s1 {
		if d := v - s0[k]; d != 0 && k != "Questions" {
			r.By[k] = d
		}
	}
	// The after-reading's SHOW STATUS is counted in the window, the
	// before-reading's not; the admin connection sends nothing else.
	if r.By["Com_show_status"]--; r.By["Com_show_status"] == 0 {
		delete(r.By, "Com_show_status")
	}
	// Questions counts the statements clients sent (a CALL once, not the
	// statements inside the procedure), the after-reading's SHOW STATUS
	// included, and no COM_PING; Com_admin_commands counts the pings.
	r.Count = s1["Questions"] - s0["Questions"] - 1 + r.By["Com_admin_commands"]
	r.Extra = map[string]int64{"Com_* in all (procedures' statements included)": sumCounts(r.By)}
	// Attribute the general log's statements to replicas by thread id.
	ports := replicaPorts(g)
	threads := map[string]string{}
	if rows, err := admin.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST"); err == nil {
		for rows.Next() {
			var id, host string
			if rows.Scan(&id, &host) == nil {
				if _, p, ok := strings.Cut(host, ":"); ok {
					n, _ := strconv.Atoi(p)
					threads[id] = ports[n]
				}
			}
		}
		rows.Close()
	}
	var err2 error
	r.Stmts, err2 = mysqlLoggedStatements(logFile, off0, threads)
	if len(r.Stmts) == 0 {
		r.Note = fmt.Sprintf("no statement breakdown (%d connections known, %d replica ports, log: %v)", len(threads), len(ports), err2)
	}
	return r
}

// exec1 runs argv and returns an error with its output when it fails.
func exec1(argv ...string) error {
	p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
	if err != nil {
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if !st.Success() {
		return fmt.Errorf("%s: %v", argv[0], st)
	}
	return nil
}

var mysqlLogLine = regexp.MustCompile(`^(?:\d{6}\s+[\d:]+)?\s+(\d+) (Query|Execute|Prepare|Ping|Connect|Quit|Init DB)\s*(.*)$`)

// mysqlLoggedStatements counts the general log's commands from offset on,
// by replica (thread id) and kind; the admin connection's are left out.
func mysqlLoggedStatements(path string, off int64, threads map[string]string) (map[string]int64, error) {
	out := map[string]int64{}
	err := eachLine(path, off, func(line string) {
		m := mysqlLogLine.FindStringSubmatch(line)
		if m == nil {
			return
		}
		who := threads[m[1]]
		if who == "" {
			return // the admin's connection, or one gone
		}
		kind := m[2]
		if m[3] != "" {
			kind += " " + stmtKind(m[3])
		}
		out[who+": "+kind]++
	})
	return out, err
}

func (b *bench) redisServerLoad(ctx context.Context, window time.Duration) *serverLoad {
	r := &serverLoad{Store: "Redis", Unit: "commands", Settle: serverSettle,
		How: "INFO commandstats of a private redis-server after CONFIG RESETSTAT, the reading's own INFO and CONFIG left out, and the commands the store's Lua scripts run (which commandstats counts too)"}
	port, err := freePort()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	dir, err := os.MkdirTemp(b.tmp, "redis-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	a := &redisAdmin{base: fmt.Sprintf("redis://127.0.0.1:%d/0", port), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	srv, err := b.startPrivate("serverload-redis", []string{lookPath("redis-server"), "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir},
		func() error { _, err := a.do(ctx, "PING"); return err })
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer func() { srv.killGroup(syscall.SIGTERM); srv.wait(10 * time.Second) }()
	g, err := b.startServerGroup("redis", a.dsnFor("lrbench"))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	var s1 map[string]int64
	var e0, e1 error
	r.Window = b.serverWindow(serverSettle, window,
		func() { _, e0 = a.do(ctx, "CONFIG", "RESETSTAT") },
		func() { s1, e1 = a.commandStats(ctx) })
	if e0 != nil || e1 != nil {
		r.Err = fmt.Sprint(e0, e1)
		return r
	}
	r.By = map[string]int64{}
	for k, v := range s1 {
		// The reset's own CONFIG is counted after the reset; the final INFO
		// before its reply.
		if k == "config|resetstat" || k == "info" {
			continue
		}
		r.By[k] = v
	}
	// commandstats (and total_commands_processed) count the commands a
	// script runs as well as its EVALSHA; the clients sent only the latter.
	inner := scriptCommands(filepath.Join(b.root, "lease", "redis", "lua"))
	var in int64
	for k, v := range r.By {
		if inner[k] {
			in += v
		} else {
			r.Count += v
		}
	}
	r.Extra = map[string]int64{"run inside the store's scripts": in}
	return r
}

var luaCall = regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)

// scriptCommands is the set of commands (lower case, as commandstats names
// them) the Lua scripts in dir call.
func scriptCommands(dir string) map[string]bool {
	out := map[string]bool{}
	fs, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	for _, f := range fs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, m := range luaCall.FindAllStringSubmatch(string(b), -1) {
			out[strings.ToLower(m[1])] = true
		}
	}
	return out
}

func (b *bench) etcdServerLoad(window time.Duration) *serverLoad {
	r := &serverLoad{Store: "etcd", Unit: "requests", Settle: serverSettle,
		How: "Δ grpc_server_handled_total (unary calls, and streams ended) plus Δ grpc_server_msg_received_total of streams, summed over the benchmark's three members"}
	e := b.etcdSrv
	g, err := b.startServerGroup("etcd", e.dsn(scopeName("serverload")))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer g.stop()
	var m0, m1 map[string]float64
	var e0, e1 error
	r.Window = b.serverWindow(serverSettle, window,
		func() { m0, e0 = etcdCounters(e) },
		func() { m1, e1 = etcdCounters(e) })
	if e0 != nil || e1 != nil {
		r.Err = fmt.Sprint(e0, e1)
		return r
	}
	r.By, r.Extra = map[string]int64{}, map[string]int64{}
	for k, v := range m1 {
		d := int64(v - m0[k])
		if d == 0 {
			continue
		}
		if strings.HasPrefix(k, "raft ") {
			r.Extra[k] = d
			continue
		}
		r.By[k] = d
	}
	r.Count = sumCounts(r.By)
	return r
}

// etcdCounters reads, summed over the members: gRPC unary calls handled by
// method ("Range"), messages received on streams ("LeaseKeepAlive msg"),
// and the raft proposals committed (the largest member's, since every
// member commits every proposal).
func etcdCounters(e *etcdServer) (map[string]float64, error) {
	out := map[string]float64{}
	c := http.Client{Timeout: 10 * time.Second}
	for _, ep := range e.endpoints {
		resp, err := c.Get("http://" + ep + "/metrics")
		if err != nil {
			return nil, err
		}
		ms, err := parseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			method := m.labels["grpc_method"]
			switch {
			case m.name == "grpc_server_handled_total" && m.labels["grpc_type"] == "unary":
				out[method] += m.value
			case m.name == "grpc_server_msg_received_total" && m.labels["grpc_type"] == "bidi_stream":
				out[method+" msg"] += m.value
			case m.name == "etcd_server_proposals_committed_total":
				out["raft proposals committed"] = max(out["raft proposals committed"], m.value)
			}
		}
	}
	return out, nil
}

// sortedCounts lists m's entries, largest first, as "k n".
func sortedCounts(m map[string]int64, per time.Duration) []string {
	var out []string
	for _, k := range sortedKeys(m) {
		if per > 0 {
			out = append(out, fmt.Sprintf("%s %d (%.2f/s)", k, m[k], float64(m[k])/per.Seconds()))
		} else {
			out = append(out, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return out
}

// sortedKeys lists m's keys, largest count first.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
