// Command bench measures leaderrun against the performance targets of the
// design (§8, and §9 for partitions), on every store it can reach — SQLite,
// PostgreSQL, MariaDB, Redis and etcd — and etcdctl lock on the same etcd
// cluster as a peer, with real processes and real signals, and writes the
// results as Markdown.
//
//	cd lab && go run ./bench -out ../BENCHMARKS.md -json bench/results.json   # full run, about 30 minutes
//	cd lab && go run ./bench -quick -out /tmp/quick.md                         # about 10 minutes
//
// It lives in the lab module (lab/go.mod), apart from the product's, and
// measures the product of the same checkout (a replace of ../).
//
// It builds leaderrun (CGO_ENABLED=0, urfave_cli_no_docs, as `make build`
// does) and a small child program into a temp dir, starts every process in
// a process group of its own, talks only to 127.0.0.1, and kills what it
// started and removes the temp dir when it ends or is interrupted. PostgreSQL,
// MariaDB and Redis are used when -pg, -mysql and -redis connect (the
// benchmark creates and drops databases, and key prefixes, of its own);
// etcd and etcdctl when they are on PATH (it starts a three-member
// cluster of its own on loopback ports). It installs nothing.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	out          string
	quick        bool
	handoffRuns  int
	crashRuns    int
	shortRuns    int
	replicas     int
	costWindow   time.Duration
	idleWindow   time.Duration
	execRuns     int
	initRuns     int
	scaleNames   int
	scaleWindow  time.Duration
	scaleReps    int
	pgDSN        string
	mysqlDSN     string
	redisDSN     string
	stepRuns     int
	rightRuns    int
	partN        int
	partM        int
	partTerm     int
	partKill     int
	partCostWin  time.Duration
	kubeHandoff  int
	kubeCrash    int
	kubeWindow   time.Duration
	leaderrunBin string
	only         string
	keep         bool
	jsonOut      string
	render       string
}

// bench is one run of the benchmark.
type bench struct {
	opt options
	// groupArgs, when set, gives the serverload group's replica i its
	// extra options (the right section's load).
	groupArgs func(i int) []string
	root      string // the repository: the product's module
	lab       string // the lab module (bench, chaos), root/lab
	tmp       string
	procs     *procs
	lrBin     string
	// goInitBin is the floor of a Go init (bench/goinit), for "As an init".
	goInitBin string
	childBin  string
	strace    string
	etcd      string
	etcdctl   string
	pg        *pgAdmin
	pgNote    string // why PostgreSQL parts were skipped or changed
	mysql     *mysqlAdmin
	redis     *redisAdmin
	etcdSrv   *etcdServer
	etcdNote  string // why etcd (and the peer) were not measured
	// stores are the stores this run measures leaderrun on, in the order
	// of storeNames; storeNotes says why one is missing.
	stores     []*store
	storeNotes map[string]string
	calOnce    sync.Once
	cal        sqliteCalibration // see calibration
	quit       chan struct{}
	quitOnce   sync.Once
	stopped    atomic.Bool
	started    time.Time
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-calib-sqlite" {
		os.Exit(calibMain(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "-rollout" {
		os.Exit(rolloutMain(os.Args[1:])) // rollout.go
	}
	var o options
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "write the report here")
	flag.BoolVar(&o.quick, "quick", false, "few runs and short windows (about 2 minutes); numbers are indicative only")
	flag.IntVar(&o.handoffRuns, "handoff-runs", 100, "graceful hand-offs per system")
	flag.IntVar(&o.crashRuns, "crash-runs", 5, "crash failovers per system at default timings (TTL 15s)")
	flag.IntVar(&o.shortRuns, "crash-short-runs", 20, "crash failovers per system at short timings (TTL 3s)")
	flag.IntVar(&o.replicas, "replicas", 3, "replicas per hand-off and failover scenario")
	flag.DurationVar(&o.costWindow, "cost-window", 60*time.Second, "store-cost measurement window")
	flag.DurationVar(&o.idleWindow, "idle-window", 30*time.Second, "idle footprint window")
	flag.IntVar(&o.execRuns, "exec-runs", 30, "start-to-exec runs (and as many direct runs)")
	flag.IntVar(&o.initRuns, "init-runs", 50, "as an init: rounds of start-to-exit and SIGTERM-to-exit of each init (leaderrun, tini, dumb-init)")
	flag.IntVar(&o.scaleNames, "scale-names", 1000, "names held at once in the scale test")
	flag.DurationVar(&o.scaleWindow, "scale-window", 60*time.Second, "scale test window")
	flag.IntVar(&o.scaleReps, "scale-replicas", 2, "Stores (replicas) competing for every name in the scale test")
	flag.StringVar(&o.pgDSN, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL maintenance DSN (loopback only); the benchmark creates and drops databases lrbench_*; empty skips PostgreSQL")
	flag.StringVar(&o.mysqlDSN, "mysql", "mysql://root@127.0.0.1:3306/",
		"MariaDB server DSN (loopback only); the benchmark creates and drops databases lrbench_*; empty skips MariaDB")
	flag.StringVar(&o.redisDSN, "redis", "redis://127.0.0.1:6379/0",
		"Redis server URL (loopback only); the benchmark uses key prefixes lrbench-* and deletes them; empty skips Redis")
	flag.IntVar(&o.stepRuns, "stepdown-runs", 20, "step-down hand-overs per store")
	flag.IntVar(&o.rightRuns, "right-runs", 10, "right: health hand-overs and preemptions per store")
	flag.IntVar(&o.partN, "partitions", 256, "partitions of the partitioned section's group")
	flag.IntVar(&o.partM, "partition-replicas", 4, "replicas of the partitioned section's group")
	flag.IntVar(&o.partTerm, "partition-term-runs", 20, "partitioned: SIGTERMs of one replica (each followed by a join) per store")
	flag.IntVar(&o.partKill, "partition-kill-runs", 5, "partitioned: SIGKILLs of one replica (each followed by a join) per store")
	flag.DurationVar(&o.partCostWin, "partition-cost-window", 60*time.Second, "partitioned: store-cost window at 16 and 1,024 partitions")
	flag.IntVar(&o.kubeHandoff, "kube-handoff-runs", 10, "kube: graceful hand-offs per system")
	flag.IntVar(&o.kubeCrash, "kube-crash-runs", 3, "kube: crash failovers per system (those that wait for the Lease's expiry take about 20 s each)")
	flag.DurationVar(&o.kubeWindow, "kube-window", 60*time.Second, "kube: API server load window per system")
	flag.StringVar(&o.leaderrunBin, "leaderrun", "", "leaderrun binary to measure (default: build it from this module)")
	flag.StringVar(&o.only, "only", "", "comma-separated sections to run: footprint,init,handoff,stepdown,right,cost,serverload,crash,scale,partitions,kube (default all)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (logs, strace summaries)")
	flag.StringVar(&o.jsonOut, "json", "", "also write the raw results as JSON to this file")
	flag.StringVar(&o.render, "render", "", "measure nothing: render -out from a -json file of an earlier run (with the current bench/findings.md)")
	flag.Parse()
	if o.render != "" {
		os.Exit(renderMain(o.render, o.out))
	}
	if o.quick {
		o.handoffRuns, o.crashRuns, o.shortRuns = 10, 1, 3
		o.costWindow, o.idleWindow, o.execRuns, o.initRuns = 15*time.Second, 10*time.Second, 10, 15
		o.scaleWindow = 15 * time.Second
		o.stepRuns, o.partTerm, o.partKill, o.partCostWin = 5, 3, 1, 15*time.Second
		o.rightRuns = 3
		o.kubeHandoff, o.kubeCrash, o.kubeWindow = 5, 1, 15*time.Second
	}
	b := &bench{opt: o, quit: make(chan struct{}), started: time.Now(), storeNotes: map[string]string{}}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "bench: %v: stopping\n", s)
		b.stop()
	}()
	code := b.main()
	os.Exit(code)
}

func (b *bench) stop() {
	b.quitOnce.Do(func() {
		b.stopped.Store(true)
		close(b.quit)
	})
}

func (b *bench) stopping() bool { return b.stopped.Load() }

// sleep waits d or until the benchmark is interrupted.
func (b *bench) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.quit:
	}
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func (b *bench) tmpPath(name string) string { return filepath.Join(b.tmp, name) }

func (b *bench) want(section string) bool {
	if b.opt.only == "" {
		return true
	}
	for _, s := range strings.Split(b.opt.only, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

// onlyKube reports whether -only names the kube section alone, which
// needs none of the other sections' stores, servers or binaries.
func (b *bench) onlyKube() bool {
	if b.opt.only == "" {
		return false
	}
	for _, s := range strings.Split(b.opt.only, ",") {
		if strings.TrimSpace(s) != "kube" {
			return false
		}
	}
	return true
}

func (b *bench) main() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-b.quit; cancel() }()

	var err error
	if b.tmp, err = os.MkdirTemp("", "leaderrun-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	logDir := filepath.Join(b.tmp, "logs")
	os.MkdirAll(logDir, 0o755)
	defer func() {
		if b.opt.keep {
			fmt.Fprintln(os.Stderr, "bench: kept", b.tmp)
			return
		}
		os.RemoveAll(b.tmp)
	}()
	if err := b.setup(ctx, logDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer b.procs.stopAll()
	if b.pg != nil {
		defer b.pg.close(context.Background())
	}
	if b.mysql != nil {
		defer b.mysql.close()
	}
	if b.redis != nil {
		defer b.redis.close()
	}
	if b.etcdSrv != nil {
		defer b.etcdSrv.stop()
	}
	rep := b.run(ctx)
	if b.stopping() {
		fmt.Fprintln(os.Stderr, "bench: interrupted; no report written")
		return 1
	}
	if err := os.WriteFile(b.opt.out, []byte(rep.markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if b.opt.jsonOut != "" {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(b.opt.jsonOut, js, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}
	b.progress("wrote %s", b.opt.out)
	return 0
}

// setup builds the binaries and finds the tools and servers.
func (b *bench) setup(ctx context.Context, logDir string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return fmt.Errorf("run from inside the lab module, leaderrun's lab/ (go env GOMOD: %v)", err)
	}
	b.lab = filepath.Dir(strings.TrimSpace(string(out)))
	b.root = filepath.Dir(b.lab)
	build := func(dst, pkg string) error {
		// The tag as `make build` sets it.
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "urfave_cli_no_docs", "-o", dst, pkg)
		cmd.Dir = b.lab
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return nil
	}
	b.childBin = b.tmpPath("benchchild")
	if err := build(b.childBin, "./bench/benchchild"); err != nil {
		return err
	}
	if b.onlyKube() {
		// The kube section builds its own leaderrun and starts its own server.
		b.procs = newProcs(logDir, b.childBin)
		return nil
	}
	b.goInitBin = b.tmpPath("goinit")
	if err := build(b.goInitBin, "./bench/goinit"); err != nil {
		return err
	}
	b.procs = newProcs(logDir, b.childBin)
	if b.opt.leaderrunBin != "" {
		if b.lrBin, err = filepath.Abs(b.opt.leaderrunBin); err != nil {
			return err
		}
	} else {
		// As `make build` builds it: with leaderrun-init embedded, stripped.
		b.progress("building leaderrun (make build)")
		b.lrBin = b.tmpPath("leaderrun")
		cmd := exec.Command("make", "build", "OUT="+b.lrBin)
		cmd.Dir = b.root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("make build: %v\n%s", err, out)
		}
	}
	b.strace = lookPath("strace")
	b.etcd, b.etcdctl = lookPath("etcd"), lookPath("etcdctl")
	switch {
	case b.etcd == "" || b.etcdctl == "":
		b.etcdNote = "etcd and etcdctl are not on PATH: leaderrun on etcd and the peer (etcdctl lock) were NOT measured. " +
			"On Debian: apt-get update && apt-get install -y etcd-server etcd-client."
	default:
		if b.etcdSrv, err = b.startEtcd(); err != nil {
			b.etcdNote = "etcd did not start: " + err.Error()
			b.etcdSrv = nil
		}
	}
	if b.opt.pgDSN == "" {
		b.pgNote = "PostgreSQL skipped: -pg is empty"
	} else if b.pg, err = openPGAdmin(ctx, b.opt.pgDSN); err != nil {
		b.pgNote = "PostgreSQL skipped: " + err.Error()
		b.pg = nil
	}
	b.setupStores(ctx)
	if n, ok := b.storeNotes["PostgreSQL"]; ok && b.pgNote == "" {
		b.pgNote = "PostgreSQL " + n
	}
	return nil
}

// renderMain rewrites the Markdown report of an earlier run from its JSON.
func renderMain(in, out string) int {
	js, err := os.ReadFile(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	var rep report
	if err := json.Unmarshal(js, &rep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		rep.Findings = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "bench", "findings.md") // lab/bench
	}
	if err := os.WriteFile(out, []byte(rep.markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

func calibMain(args []string) int {
	fs := flag.NewFlagSet("calib", flag.ExitOnError)
	path := fs.String("calib-sqlite", "", "")
	op := fs.String("calib-op", "read", "")
	n := fs.Int("calib-n", 100, "")
	fs.Parse(args)
	if err := calibSQLite(*path, *op, *n); err != nil {
		fmt.Fprintln(os.Stderr, "calib:", err)
		return 1
	}
	return 0
}
