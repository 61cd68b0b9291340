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
	Machine   machineInfo
	Command   string
	Opt       runOptions
	PGNote    string
	PGVersion string
	PeerNote  string
	EtcdVer   string
	MySQLVer  string
	RedisVer  string
	// Stores are the stores leaderrun was measured on; StoreNotes says why
	// one of storeNames is missing.
	Stores     []string
	StoreNotes map[string]string
	BinSize    int64
	Idle       []idleResult
	Exec       *execResult
	Init       *initResult
	Cal        sqliteCalibration
	Cost       []*costResult
	ServerLoad []*serverLoad // the serverload section
	Handoff    []*failoverResult
	Crash      []*failoverResult
	TermProbe  etcdTermProbe
	Scale      *scaleResult
	StepDown   []*stepResult
	Right      []*rightResult // the right section: health and preemption
	// RightLoad is the serverload section's measurement with every
	// replica given a priority and a health check (the right section).
	RightLoad  []*serverLoad
	Parts      []*partResult
	PartCost   []*partCostResult
	Kube       *kubeResult // the kube section; nil when it did not run
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
	PartCostWindow         time.Duration
	HandoffRuns, CrashRuns int
	ShortRuns, StepRuns    int
	PartN, PartM           int
	PartTerm, PartKill     int
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
// ones (start-to-exec, hand-off, step-down) away from the busy ones (store
// cost under strace, 1,000 names, partitions).
func (b *bench) run(ctx context.Context) *report {
	o := b.opt
	rep := &report{Machine: readMachine(), PGNote: b.pgNote, LoadBefore: loadavg(),
		Findings: filepath.Join(b.lab, "bench", "findings.md"), Busy: map[string]float64{},
		StoreNotes: b.storeNotes, PeerNote: b.etcdNote,
		Opt: runOptions{Quick: o.quick, Replicas: o.replicas, ScaleNames: o.scaleNames,
			CostWindow: o.costWindow, IdleWindow: o.idleWindow, PartCostWindow: o.partCostWin,
			HandoffRuns: o.handoffRuns, CrashRuns: o.crashRuns, ShortRuns: o.shortRuns, StepRuns: o.stepRuns,
			PartN: o.partN, PartM: o.partM, PartTerm: o.partTerm, PartKill: o.partKill}}
	rep.Command = "cd lab && go run ./bench " + strings.Join(os.Args[1:], " ")
	if fi, err := os.Stat(b.lrBin); err == nil {
		rep.BinSize = fi.Size()
	}
	for _, s := range b.stores {
		rep.Stores = append(rep.Stores, s.Name)
	}
	if b.pg != nil {
		rep.PGVersion = b.pg.version(ctx)
	}
	if b.mysql != nil {
		rep.MySQLVer = b.mysql.version(ctx)
	}
	if b.redis != nil {
		rep.RedisVer = b.redis.version(ctx)
	}
	etcd := b.etcdSrv
	if etcd != nil {
		if out, err := exec.Command(b.etcd, "--version").Output(); err == nil {
			rep.EtcdVer = strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: ")
		}
	}

	if b.want("footprint") && !b.stopping() {
		b.progress("start-to-exec: %d runs", o.execRuns)
		busy := machineBusy()
		rep.Exec = b.measureStartToExec(o.execRuns)
		rep.Busy["exec"] = busy()
	}

	if b.want("init") && !b.stopping() {
		b.progress("as an init: %d rounds beside tini and dumb-init", o.initRuns)
		busy := machineBusy()
		rep.Init = b.measureInit(o.initRuns)
		rep.Busy["init"] = busy()
	}
	if b.want("handoff") {
		b.runHandoffs(ctx, rep)
	}

	if b.want("stepdown") {
		b.runStepDowns(ctx, rep)
	}

	if (b.want("cost") || b.want("footprint")) && !b.stopping() {
		busy := machineBusy()
		var wg sync.WaitGroup
		var mu sync.Mutex
		add := func(r *costResult) {
			mu.Lock()
			rep.Cost = append(rep.Cost, r)
			mu.Unlock()
		}
		if b.want("cost") {
			rep.Cal = b.calibration()
			b.progress("store cost: %v window, 1/2/8 followers, every store at once (etcd one group at a time)", o.costWindow)
			var mon *redisMonitor
			if st := b.storeOf("Redis"); st != nil {
				var err error
				if mon, err = startRedisMonitor(ctx, b.redis.addr); err != nil {
					add(&costResult{Store: "Redis", Tool: "leaderrun", Followers: 2, Err: "MONITOR: " + err.Error()})
				} else {
					defer mon.close()
				}
			}
			for _, k := range []int{1, 2, 8} {
				for _, st := range b.stores {
					var f func() *costResult
					switch st.Name {
					case "SQLite":
						if b.strace != "" {
							f = func() *costResult { return b.sqliteCost(k, o.costWindow) }
						}
					case "PostgreSQL":
						f = func() *costResult { return b.pgCost(ctx, st, k, o.costWindow) }
					case "MariaDB":
						f = func() *costResult { return b.mysqlCost(ctx, st, k, o.costWindow) }
					case "Redis":
						if mon != nil {
							f = func() *costResult { return b.redisCost(ctx, st, mon, k, o.costWindow) }
						}
					}
					if f != nil {
						wg.Add(1)
						go func() { defer wg.Done(); add(f()) }()
					}
				}
			}
			if etcd != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var cs []*contender
					for _, k := range []int{1, 2, 8} {
						if st := b.storeOf("etcd"); st != nil {
							dsn, err := st.fresh(ctx, fmt.Sprintf("cost_%d", k))
							if err != nil {
								add(&costResult{Store: "etcd", Tool: "leaderrun", Followers: k, Err: err.Error()})
								continue
							}
							cs = append(cs, b.leaderrunContender(st.Label(), "etcd", dsn, defTTL, defPeriod))
						}
					}
					for i, c := range cs {
						if b.stopping() {
							return
						}
						add(b.etcdCost(ctx, c, []int{1, 2, 8}[i], o.costWindow))
					}
					if !b.stopping() {
						add(b.etcdCost(ctx, b.etcdContender("etcdctl lock · etcd", etcd, defTTL), 2, o.costWindow))
					}
				}()
			}
		}
		if b.want("footprint") {
			b.progress("idle footprint: %v window", o.idleWindow)
			for _, name := range []string{"SQLite", "PostgreSQL"} {
				st := b.storeOf(name)
				if st == nil {
					continue
				}
				dsn, err := st.fresh(ctx, "idle")
				if err != nil {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := b.measureIdle(name, dsn, o.idleWindow)
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
		b.runCrashes(ctx, rep)
	}

	if b.want("right") && !b.stopping() {
		b.runRight(ctx, rep, o.rightRuns)
		b.progress("store load with priorities and health checks: 1 leader + 2 followers per store, %v window", o.costWindow)
		busy := machineBusy()
		b.groupArgs = rightGroupArgs
		rep.RightLoad = b.serverLoads(ctx, o.costWindow)
		b.groupArgs = nil
		rep.Busy["right load"] = busy()
	}

	if b.want("serverload") && !b.stopping() {
		b.progress("store load counted at the server: 1 leader + 2 followers per store, %v window", o.costWindow)
		busy := machineBusy()
		rep.ServerLoad = b.serverLoads(ctx, o.costWindow)
		rep.Busy["serverload"] = busy()
	}

	if b.want("scale") && b.pg != nil && !b.stopping() {
		b.progress("scale: %d names, %d replicas, %v window", o.scaleNames, o.scaleReps, o.scaleWindow)
		busy := machineBusy()
		rep.Scale = b.runScale(ctx, o.scaleNames, o.scaleReps, o.scaleWindow)
		rep.Busy["scale"] = busy()
	}

	if b.want("partitions") && !b.stopping() {
		for _, name := range []string{"SQLite", "PostgreSQL"} {
			st := b.storeOf(name)
			if st == nil || b.stopping() {
				continue
			}
			b.progress("partitions · %s: N=%d, M=%d, %d SIGTERM and %d SIGKILL runs", name, o.partN, o.partM, o.partTerm, o.partKill)
			busy := machineBusy()
			rep.Parts = append(rep.Parts, b.runPartitions(ctx, st, o.partN, o.partM, o.partTerm, o.partKill))
			rep.Busy["partitions "+name] = busy()
		}
		for _, name := range []string{"PostgreSQL", "SQLite"} {
			st := b.storeOf(name)
			if st == nil || b.stopping() {
				continue
			}
			b.progress("partitions · %s: store cost at 16 and 1,024 partitions, %d replicas, %v window", name, o.partM, o.partCostWin)
			busy := machineBusy()
			out := make([]*partCostResult, 2)
			var wg, barrier sync.WaitGroup
			for i, n := range []int{16, 1024} {
				wg.Add(1)
				barrier.Add(1)
				go func() {
					defer wg.Done()
					out[i] = b.partCost(ctx, st, n, o.partM, o.partCostWin, &barrier)
				}()
			}
			wg.Wait()
			rep.PartCost = append(rep.PartCost, out...)
			rep.Busy["partcost "+name] = busy()
		}
	}
	if b.want("kube") && !b.stopping() && (kubeSection != nil || b.opt.only != "") {
		b.progress("kube: leaderrun's Kubernetes store beside client-go's leader election")
		busy := machineBusy()
		rep.Kube = b.runKube(ctx)
		rep.Busy["kube"] = busy()
	}
	rep.LoadAfter = loadavg()
	rep.Generated = time.Now().UTC()
	rep.Took = time.Since(b.started)
	return rep
}

// runStepDowns measures `leaderrun step-down --wait` on every store.
func (b *bench) runStepDowns(ctx context.Context, rep *report) {
	o := b.opt
	for _, st := range b.stores {
		if b.stopping() {
			break
		}
		dsn, err := st.fresh(ctx, "stepdown")
		if err != nil {
			rep.StepDown = append(rep.StepDown, &stepResult{Store: st.Name, Notes: []string{err.Error()}})
			continue
		}
		b.progress("step-down: %s, %d runs", st.Label(), o.stepRuns)
		busy := machineBusy()
		rep.StepDown = append(rep.StepDown, b.runStepDown(st, dsn, o.stepRuns))
		rep.Busy["stepdown "+st.Name] = busy()
	}
}

// runCrashes measures crash failover (SIGKILL of the holder) of leaderrun
// on every store and of etcdctl lock, at TTL 15 s and 3 s.
func (b *bench) runCrashes(ctx context.Context, rep *report) {
	o, etcd := b.opt, b.etcdSrv
	type cfg struct {
		c    *contender
		runs int
	}
	var cfgs []cfg
	short := []string{"--ttl", "3s", "--kill-grace", "1s"}
	const shortTTL, shortPeriod = 3 * time.Second, 250 * time.Millisecond
	for _, st := range b.stores {
		dsn, err := st.fresh(ctx, "crash")
		if err != nil {
			continue
		}
		c15 := b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod)
		c3 := b.leaderrunContender(st.Label(), st.Name, dsn, shortTTL, shortPeriod, short...)
		if !st.ExactRemaining {
			c15.DSN, c3.DSN = "", ""
		}
		cfgs = append(cfgs, cfg{c15, o.crashRuns}, cfg{c3, o.shortRuns})
	}
	if etcd != nil {
		cfgs = append(cfgs,
			cfg{b.etcdContender("etcdctl lock · etcd", etcd, defTTL), o.crashRuns},
			cfg{b.etcdContender("etcdctl lock · etcd", etcd, shortTTL), o.shortRuns})
	}
	// leaderrun's scenarios take milliseconds per crash on one host:
	// they run one after another, so that no other scenario's
	// replicas start or crash beside the one measured. etcdctl's
	// wait out their TTLs, idle, meanwhile.
	b.progress("crash failover: %d scenarios, leaderrun's one at a time beside etcdctl's", len(cfgs))
	busy := machineBusy()
	results := make([]*failoverResult, len(cfgs))
	var wg sync.WaitGroup
	var mine []int
	for i, c := range cfgs {
		if c.c.Tool == "leaderrun" {
			mine = append(mine, i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = b.runFailover(c.c, "crash", c.runs, o.replicas)
		}()
	}
	for _, i := range mine {
		results[i] = b.runFailover(cfgs[i].c, "crash", cfgs[i].runs, o.replicas)
	}
	wg.Wait()
	rep.Crash = results
	rep.Busy["crash"] = busy()
}
