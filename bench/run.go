package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// report is everything one run measured.
type report struct {
	Machine    machineInfo
	Command    string
	Opt        runOptions
	PGNote     string
	PGVersion  string
	PeerNote   string
	EtcdVer    string
	BinSize    int64
	Idle       []idleResult
	Exec       *execResult
	Cal        sqliteCalibration
	Cost       []*costResult
	Handoff    []*failoverResult
	Crash      []*failoverResult
	TermProbe  etcdTermProbe
	Scale      *scaleResult
	Took       time.Duration
	LoadBefore string
	LoadAfter  string
	Findings   string // a Markdown file appended to the report, if it exists
	Generated  time.Time
	// Busy is how many of the machine's CPUs were busy (all processes,
	// the benchmark's included) during each section, by section name.
	Busy map[string]float64
}

// runOptions are the options the report mentions.
type runOptions struct {
	Quick                  bool
	Replicas, ScaleNames   int
	CostWindow, IdleWindow time.Duration
}

type machineInfo struct {
	CPUs      int
	CPUModel  string
	Kernel    string
	GoVersion string
	MemTotal  string
}

func readMachine() machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(strings.TrimPrefix(string(out), "go version "))
	}
	if kb, err := statusKBFile("/proc/meminfo", "MemTotal"); err == nil {
		m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	return m
}

func statusKBFile(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			var n int64
			_, err := fmt.Sscan(strings.TrimSpace(v), &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// run measures every section in an order that keeps the latency-sensitive
// ones (start-to-exec, hand-off) away from the busy ones (store cost under
// strace, 1,000 names).
func (b *bench) run(ctx context.Context) *report {
	rep := &report{Machine: readMachine(), PGNote: b.pgNote, LoadBefore: loadavg(),
		Findings: filepath.Join(b.root, "bench", "findings.md"), Busy: map[string]float64{},
		Opt: runOptions{Quick: b.opt.quick, Replicas: b.opt.replicas, ScaleNames: b.opt.scaleNames,
			CostWindow: b.opt.costWindow, IdleWindow: b.opt.idleWindow}}
	rep.Command = "go run ./bench " + strings.Join(os.Args[1:], " ")
	if fi, err := os.Stat(b.lrBin); err == nil {
		rep.BinSize = fi.Size()
	}
	if b.pg != nil {
		rep.PGVersion = b.pg.version(ctx)
	}
	pgOK := b.pg != nil && b.pgCLI
	var etcd *etcdServer
	switch {
	case b.etcd == "" || b.etcdctl == "":
		rep.PeerNote = "etcd and etcdctl are not on PATH: the peer (etcdctl lock) was NOT measured. " +
			"On Debian: apt-get update && apt-get install -y etcd-server etcd-client."
	case b.want("handoff") || b.want("crash"):
		if out, err := exec.Command(b.etcd, "--version").Output(); err == nil {
			rep.EtcdVer = strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: ")
		}
		var err error
		if etcd, err = b.startEtcd(); err != nil {
			rep.PeerNote = "etcd did not start: " + err.Error()
			etcd = nil
		} else {
			defer etcd.stop()
		}
	}

	if b.want("footprint") && !b.stopping() {
		b.progress("start-to-exec: %d runs", b.opt.execRuns)
		busy := machineBusy()
		rep.Exec = b.measureStartToExec(b.opt.execRuns)
		rep.Busy["exec"] = busy()
	}

	if b.want("handoff") {
		var cs []*contender
		cs = append(cs, b.leaderrunContender("leaderrun · SQLite", "SQLite", "sqlite:"+b.tmpPath("handoff.db"), defTTL, defPeriod))
		if pgOK {
			cs = append(cs, b.leaderrunContender("leaderrun · PostgreSQL", "PostgreSQL", b.pg.dsnFor(b.pgDB), defTTL, defPeriod))
		}
		if etcd != nil {
			cs = append(cs, b.etcdContender("etcdctl lock · etcd", etcd, defTTL))
		}
		for _, c := range cs {
			if b.stopping() {
				break
			}
			b.progress("hand-off: %s, %d runs", c.Label, b.opt.handoffRuns)
			busy := machineBusy()
			rep.Handoff = append(rep.Handoff, b.runFailover(c, "handoff", b.opt.handoffRuns, b.opt.replicas))
			rep.Busy["handoff "+c.Label] = busy()
		}
		if etcd != nil && !b.stopping() {
			b.progress("etcdctl: SIGTERM to etcdctl alone")
			rep.TermProbe = b.probeEtcdTerm(etcd, defTTL)
		}
	}

	if (b.want("cost") || b.want("footprint")) && !b.stopping() {
		busy := machineBusy()
		var wg sync.WaitGroup
		var mu sync.Mutex
		if b.want("cost") {
			if b.strace != "" {
				rep.Cal = b.calibrateSQLite()
			} else {
				rep.Cal.Err = "strace is not on PATH"
			}
			b.progress("store cost: %v window, 1/2/8 followers, SQLite and PostgreSQL at once", b.opt.costWindow)
			for _, k := range []int{1, 2, 8} {
				if b.strace != "" {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := b.sqliteCost(k, b.opt.costWindow, rep.Cal)
						mu.Lock()
						rep.Cost = append(rep.Cost, r)
						mu.Unlock()
					}()
				}
				if b.pg != nil {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := b.pgCost(ctx, k, b.opt.costWindow)
						mu.Lock()
						rep.Cost = append(rep.Cost, r)
						mu.Unlock()
					}()
				}
			}
		}
		if b.want("footprint") {
			b.progress("idle footprint: %v window", b.opt.idleWindow)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := b.measureIdle("SQLite", "sqlite:"+b.tmpPath("idle.db"), b.opt.idleWindow)
				mu.Lock()
				rep.Idle = append(rep.Idle, r...)
				mu.Unlock()
			}()
			if pgOK {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := b.measureIdle("PostgreSQL", b.pg.dsnFor(b.pgDB), b.opt.idleWindow)
					mu.Lock()
					rep.Idle = append(rep.Idle, r...)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		rep.Busy["cost"] = busy()
	}

	if b.want("crash") && !b.stopping() {
		type cfg struct {
			c    *contender
			runs int
		}
		var cfgs []cfg
		short := []string{"--ttl", "3s", "--kill-grace", "1s"}
		const shortTTL, shortPeriod = 3 * time.Second, 250 * time.Millisecond
		cfgs = append(cfgs,
			cfg{b.leaderrunContender("leaderrun · SQLite", "SQLite", "sqlite:"+b.tmpPath("crash.db"), defTTL, defPeriod), b.opt.crashRuns},
			cfg{b.leaderrunContender("leaderrun · SQLite", "SQLite", "sqlite:"+b.tmpPath("crash-short.db"), shortTTL, shortPeriod, short...), b.opt.shortRuns})
		if pgOK {
			cfgs = append(cfgs,
				cfg{b.leaderrunContender("leaderrun · PostgreSQL", "PostgreSQL", b.pg.dsnFor(b.pgDB), defTTL, defPeriod), b.opt.crashRuns},
				cfg{b.leaderrunContender("leaderrun · PostgreSQL", "PostgreSQL", b.pg.dsnFor(b.pgDB), shortTTL, shortPeriod, short...), b.opt.shortRuns})
		}
		if etcd != nil {
			cfgs = append(cfgs,
				cfg{b.etcdContender("etcdctl lock · etcd", etcd, defTTL), b.opt.crashRuns},
				cfg{b.etcdContender("etcdctl lock · etcd", etcd, shortTTL), b.opt.shortRuns})
		}
		b.progress("crash failover: %d scenarios at once", len(cfgs))
		busy := machineBusy()
		results := make([]*failoverResult, len(cfgs))
		var wg sync.WaitGroup
		for i, c := range cfgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = b.runFailover(c.c, "crash", c.runs, b.opt.replicas)
			}()
		}
		wg.Wait()
		rep.Crash = results
		rep.Busy["crash"] = busy()
	}
	if etcd != nil {
		etcd.stop()
	}

	if b.want("scale") && b.pg != nil && !b.stopping() {
		b.progress("scale: %d names, %d replicas, %v window", b.opt.scaleNames, b.opt.scaleReps, b.opt.scaleWindow)
		busy := machineBusy()
		rep.Scale = b.runScale(ctx, b.opt.scaleNames, b.opt.scaleReps, b.opt.scaleWindow)
		rep.Busy["scale"] = busy()
	}
	rep.LoadAfter = loadavg()
	rep.Generated = time.Now().UTC()
	rep.Took = time.Since(b.started)
	return rep
}
