package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// initResult compares leaderrun as a container's init with Debian's tini
// and dumb-init, measured side by side in one run.
type initResult struct {
	Runs int
	// Systems are the rows, in order: the command itself, tini,
	// dumb-init, leaderrun in its default mode (a PID namespace) and
	// with --pid-namespace=false.
	Systems []*initSystem
	Note    string // what was not measured, and why
}

// initSystem is one init's figures.
type initSystem struct {
	Label string
	Argv  []string // the command line, with COMMAND for the command
	// Start is spawn → exit of `INIT /bin/true`; Term is SIGTERM to the
	// init → its exit while it runs `sleep`.
	Start, Term []time.Duration
	// Self is the init's own memory (the leaderrun replica for
	// leaderrun) while it runs `sleep`; NSInit is the namespace init's,
	// for leaderrun's default mode.
	Self, NSInit *memFigures
	Err          string
}

// memFigures is a process's memory from /proc/PID/smaps_rollup: USS is
// its private pages (Private_Clean + Private_Dirty), what it alone costs.
type memFigures struct {
	RSSKB, PssKB, USSKB, PssAnonKB, PssFileKB int64
}

// Targets of issue 35 for leaderrun as an init.
const (
	targetInitStartX       = 5.0 // --once -- /bin/true p50 ≤ 5 × tini's, default mode
	targetInitStartNoNSX   = 3.0 // … ≤ 3 × with --pid-namespace=false
	targetNSInitKB         = 2 * 1024
	targetInitTerm         = 10 * time.Millisecond
	targetInitIdleReplicaK = 20 * 1024
)

// measureInit runs the init comparison: runs interleaved rounds of every
// system's start-to-exit and SIGTERM-to-exit, then reads each one's memory
// while it runs sleep.
func (b *bench) measureInit(runs int) *initResult {
	r := &initResult{Runs: runs}
	db := "sqlite:" + b.tmpPath("init.db")
	lr := func(ns string) []string {
		return []string{b.lrBin, "--name", "bench-init-ns-" + ns, "--store", db, "--once", "--log-level", "warn",
			"--pid-namespace=" + ns, "--"}
	}
	r.Systems = append(r.Systems, &initSystem{Label: "the command alone", Argv: nil})
	for _, c := range []struct{ label, bin string }{{"tini", "tini"}, {"dumb-init", "dumb-init"}} {
		p := lookPath(c.bin)
		if p == "" {
			r.Note += fmt.Sprintf("%s is not on PATH (Debian: apt-get install -y %s); ", c.bin, c.bin)
			continue
		}
		argv := []string{p}
		if c.bin == "tini" {
			argv = append(argv, "-s", "--") // -s: a subreaper, as it is when not PID 1
		}
		r.Systems = append(r.Systems, &initSystem{Label: c.label, Argv: argv})
	}
	// The floor of any Go program as an init: the runtime's start, a fork
	// and exec, a wait (bench/goinit).
	r.Systems = append(r.Systems, &initSystem{Label: "a minimal Go init (floor)", Argv: []string{b.goInitBin}})
	r.Systems = append(r.Systems,
		&initSystem{Label: "leaderrun (default: PID namespace)", Argv: lr("true")},
		&initSystem{Label: "leaderrun --pid-namespace=false", Argv: lr("false")})
	truePath, sleepPath := lookPath("true"), lookPath("sleep")
	if p, err := filepath.EvalSymlinks(sleepPath); err == nil {
		sleepPath = p // as /proc/PID/exe names it
	}
	// One run of each first: creates the SQLite file, warms the caches.
	for _, s := range r.Systems {
		if _, err := b.initStart(s, truePath); err != nil {
			s.Err = err.Error()
		}
	}
	for i := 0; i < runs && !b.stopping(); i++ {
		for _, s := range r.Systems {
			if s.Err != "" {
				continue
			}
			d, err := b.initStart(s, truePath)
			if err != nil {
				s.Err = err.Error()
				continue
			}
			s.Start = append(s.Start, d)
		}
		for _, s := range r.Systems {
			if s.Err != "" || s.Argv == nil {
				continue
			}
			d, err := b.initTerm(s, sleepPath)
			if err != nil {
				s.Err = err.Error()
				continue
			}
			s.Term = append(s.Term, d)
		}
	}
	for _, s := range r.Systems {
		if s.Err == "" && s.Argv != nil && !b.stopping() {
			if err := b.initMemory(s, sleepPath); err != nil {
				s.Err = err.Error()
			}
		}
	}
	return r
}

// initStart runs `INIT COMMAND` with COMMAND /bin/true and returns spawn →
// exit.
func (b *bench) initStart(s *initSystem, cmd string) (time.Duration, error) {
	argv := append(append([]string{}, s.Argv...), cmd)
	t0 := mono.Now()
	p, err := b.procs.start("init-start", argv, nil)
	if err != nil {
		return 0, err
	}
	if !p.wait(10 * time.Second) {
		p.killGroup(syscall.SIGKILL)
		return 0, fmt.Errorf("%s did not exit", strings.Join(argv, " "))
	}
	if !p.cmd.ProcessState.Success() {
		return 0, fmt.Errorf("%s: %v", strings.Join(argv, " "), p.cmd.ProcessState)
	}
	return time.Duration(p.exitAt - t0), nil
}

// initTerm starts `INIT sleep 60`, waits until sleep runs (and 200 ms
// more, so that the init is idle), sends SIGTERM to the init alone, as a
// container runtime's stop does, and returns the signal → the init's exit.
func (b *bench) initTerm(s *initSystem, sleep string) (time.Duration, error) {
	p, err := b.startSleeping(s, sleep)
	if err != nil {
		return 0, err
	}
	time.Sleep(200 * time.Millisecond)
	t0 := mono.Now()
	syscall.Kill(p.pid, syscall.SIGTERM)
	if !p.wait(10 * time.Second) {
		p.killGroup(syscall.SIGKILL)
		return 0, fmt.Errorf("%s did not exit on SIGTERM", s.Label)
	}
	return time.Duration(p.exitAt - t0), nil
}

// startSleeping starts `INIT sleep 60` and returns once sleep runs.
func (b *bench) startSleeping(s *initSystem, sleep string) (*proc, error) {
	argv := append(append([]string{}, s.Argv...), sleep, "60")
	p, err := b.procs.start("init-sleep", argv, nil)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if sleepRuns(p.pid, sleep) {
			return p, nil
		}
		if p.exited() {
			return nil, fmt.Errorf("%s exited (%v) before its command ran", s.Label, p.cmd.ProcessState)
		}
		time.Sleep(time.Millisecond)
	}
	p.killGroup(syscall.SIGKILL)
	return nil, fmt.Errorf("%s: sleep did not start within 10 s", s.Label)
}

// sleepRuns reports whether a descendant of pid (two levels deep at most)
// runs sleep.
func sleepRuns(pid int, sleep string) bool {
	for _, c := range childPids(pid) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); exe == sleep {
			return true
		}
		for _, g := range childPids(c) {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", g)); exe == sleep {
				return true
			}
		}
	}
	return false
}

// childPids lists pid's children, those of every thread: a Go program
// forks from whichever thread it runs on.
func childPids(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// initMemory starts `INIT sleep 60`, lets it settle for 3 s, and reads
// the init's memory and, for leaderrun in a namespace, its init's.
func (b *bench) initMemory(s *initSystem, sleep string) error {
	p, err := b.startSleeping(s, sleep)
	if err != nil {
		return err
	}
	defer func() {
		// SIGTERM, so that leaderrun releases its name.
		syscall.Kill(p.pid, syscall.SIGTERM)
		if !p.wait(10 * time.Second) {
			p.killGroup(syscall.SIGKILL)
		}
	}()
	b.sleep(3 * time.Second)
	if s.Self, err = readMem(p.pid); err != nil {
		return err
	}
	for _, c := range childPids(p.pid) {
		// The init is leaderrun-init from its memfd, or leaderrun again.
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c))
		if exe == b.lrBin || strings.HasPrefix(exe, "/memfd:leaderrun-init") {
			if s.NSInit, err = readMem(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// readMem reads pid's /proc/PID/smaps_rollup.
func readMem(pid int) (*memFigures, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil, err
	}
	m := &memFigures{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "Rss":
			m.RSSKB = n
		case "Pss":
			m.PssKB = n
		case "Pss_Anon":
			m.PssAnonKB = n
		case "Pss_File":
			m.PssFileKB = n
		case "Private_Clean", "Private_Dirty":
			m.USSKB += n
		}
	}
	return m, nil
}
