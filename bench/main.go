// Command bench measures leaderrun against the performance targets of
// docs/design.md §8, and etcdctl lock on a local etcd as a peer, with real
// processes and real signals, and writes the results as Markdown.
//
//	go run ./bench -out BENCHMARKS.md          # full run, about 5 minutes
//	go run ./bench -quick -out /tmp/quick.md   # under 2 minutes
//
// It builds leaderrun (CGO_ENABLED=0, as `make build` does) and a small
// child program into a temp dir, starts every process in a process group
// of its own, talks only to 127.0.0.1, and kills what it started and
// removes the temp dir when it ends or is interrupted. PostgreSQL is used
// when -pg connects (the benchmark creates and drops databases of its
// own); etcd and etcdctl when they are on PATH. It installs nothing.
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
	scaleNames   int
	scaleWindow  time.Duration
	scaleReps    int
	pgDSN        string
	leaderrunBin string
	only         string
	keep         bool
	jsonOut      string
	render       string
}

// bench is one run of the benchmark.
type bench struct {
	opt      options
	root     string // module root
	tmp      string
	procs    *procs
	lrBin    string
	childBin string
	strace   string
	etcd     string
	etcdctl  string
	pg       *pgAdmin
	pgCLI    bool   // the leaderrun binary opens postgres:// stores
	pgNote   string // why PostgreSQL parts were skipped or changed
	pgDB     string // database for the CLI scenarios
	quit     chan struct{}
	quitOnce sync.Once
	stopped  atomic.Bool
	started  time.Time
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-calib-sqlite" {
		os.Exit(calibMain(os.Args[1:]))
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
	flag.IntVar(&o.scaleNames, "scale-names", 1000, "names held at once in the scale test")
	flag.DurationVar(&o.scaleWindow, "scale-window", 60*time.Second, "scale test window")
	flag.IntVar(&o.scaleReps, "scale-replicas", 2, "Stores (replicas) competing for every name in the scale test")
	flag.StringVar(&o.pgDSN, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"PostgreSQL maintenance DSN (loopback only); the benchmark creates and drops databases lrbench_*; empty skips PostgreSQL")
	flag.StringVar(&o.leaderrunBin, "leaderrun", "", "leaderrun binary to measure (default: build it from this module)")
	flag.StringVar(&o.only, "only", "", "comma-separated sections to run: footprint,cost,handoff,crash,scale (default all)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (logs, strace summaries)")
	flag.StringVar(&o.jsonOut, "json", "", "also write the raw results as JSON to this file")
	flag.StringVar(&o.render, "render", "", "measure nothing: render -out from a -json file of an earlier run (with the current bench/findings.md)")
	flag.Parse()
	if o.render != "" {
		os.Exit(renderMain(o.render, o.out))
	}
	if o.quick {
		o.handoffRuns, o.crashRuns, o.shortRuns = 10, 1, 3
		o.costWindow, o.idleWindow, o.execRuns = 15*time.Second, 10*time.Second, 10
		o.scaleWindow = 15 * time.Second
	}
	b := &bench{opt: o, quit: make(chan struct{}), started: time.Now()}
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
		return fmt.Errorf("run from inside the leaderrun module (go env GOMOD: %v)", err)
	}
	b.root = filepath.Dir(strings.TrimSpace(string(out)))
	build := func(dst, pkg string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-o", dst, pkg)
		cmd.Dir = b.root
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
	b.procs = newProcs(logDir, b.childBin)
	if b.opt.leaderrunBin != "" {
		if b.lrBin, err = filepath.Abs(b.opt.leaderrunBin); err != nil {
			return err
		}
	} else {
		b.progress("building leaderrun (CGO_ENABLED=0 go build -trimpath)")
		b.lrBin = b.tmpPath("leaderrun")
		if err := build(b.lrBin, "."); err != nil {
			return err
		}
	}
	b.strace = lookPath("strace")
	b.etcd, b.etcdctl = lookPath("etcd"), lookPath("etcdctl")
	if b.opt.pgDSN == "" {
		b.pgNote = "PostgreSQL skipped: -pg is empty"
		return nil
	}
	if b.pg, err = openPGAdmin(ctx, b.opt.pgDSN); err != nil {
		b.pgNote = "PostgreSQL skipped: " + err.Error()
		b.pg = nil
		return nil
	}
	b.pgDB = fmt.Sprintf("lrbench_%d_cli", os.Getpid())
	if err := b.pg.createDB(ctx, b.pgDB); err != nil {
		b.pgNote = "PostgreSQL skipped: " + err.Error()
		b.pg = nil
		return nil
	}
	b.pgCLI, b.pgNote = b.probePGCLI()
	return nil
}

// probePGCLI checks whether the leaderrun binary opens postgres:// stores.
func (b *bench) probePGCLI() (bool, string) {
	dir, _ := os.MkdirTemp(b.tmp, "pgprobe-")
	cmd := exec.Command(b.lrBin, "--name", "bench-probe", "--store", b.pg.dsnFor(b.pgDB), "--once",
		"--acquire-timeout", "10s", "--log-level", "error", "--", b.childBin, "-dir", dir, "-mode", "exit")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return false, fmt.Sprintf("the leaderrun binary could not run on PostgreSQL (%v: %s)", err, msg)
	}
	return true, ""
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
		rep.Findings = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "bench", "findings.md")
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
