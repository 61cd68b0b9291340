package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
	"github.com/leaderrun/leaderrun/lease"
)

// contender is a leadership tool under test: leaderrun on one store, or
// etcdctl lock. A replica runs benchchild -mode hold while it leads.
type contender struct {
	Label string        // "leaderrun · SQLite"
	Tool  string        // "leaderrun" or "etcdctl lock"
	Store string        // "SQLite", "PostgreSQL", "etcd"
	TTL   time.Duration // the lease TTL the replicas use
	// Period is the holder's renew (keep-alive) period; crash runs kill at
	// a random phase of it.
	Period time.Duration
	// spawn starts replica idx campaigning for name; its child records in dir.
	spawn func(name, dir string, idx int) (*proc, error) `json:"-"`
	// standby waits until the n replicas started so far are all campaigning
	// (one leads, the rest wait), p being the newest.
	standby func(name string, p *proc, n int, timeout time.Duration) error `json:"-"`
	// stopHolder asks the holder to stop gracefully, the way an operator
	// or a service manager would.
	stopHolder func(p *proc) `json:"-"`
	// StopHow says what stopHolder does, for the report.
	StopHow string
	// NoPIDNamespace: leaderrun's replicas run with --pid-namespace=false
	// (see withoutPIDNamespace); the default mode otherwise.
	NoPIDNamespace bool
	// DSN is leaderrun's store, read after a crash for the time the dead
	// holder's lease had left; empty for the peer.
	DSN string `json:"-"`
	// leaseLeft, when set and DSN is not, is how a crash run reads the
	// time the dead holder's lease has left (a peer's lease that
	// leaderrun's store would judge by rules of its own).
	leaseLeft func(name string) (time.Duration, error) `json:"-"`
}

// failoverResult holds one scenario's samples.
type failoverResult struct {
	C    *contender
	Mode string // "handoff" or "crash"
	TTL  time.Duration
	// Latency: kill() of the holder → the next child's own start reading.
	Latency []time.Duration
	// Detect: kill() → the watcher saw the next child's start file.
	Detect []time.Duration
	// Direct: the same child spawned directly by the benchmark → its start
	// reading; the same-run baseline (fork+exec+runtime start).
	Direct []time.Duration
	// HolderExit: kill() → the old holder process was reaped.
	HolderExit []time.Duration
	// Told: hand-off only: kill() → the old child's own reading when it got
	// its stop signal (through the namespace's init, in leaderrun's
	// default mode).
	Told []time.Duration
	// OldChildAlive counts runs in which the old holder's child was still
	// running once the next child had started.
	OldChildAlive int
	// OldChildStillRunning counts crash runs in which the old child was
	// still running 1s after the next child started (a second leader).
	OldChildStillRunning int
	// Overlaps counts hand-offs where the next child started before the
	// old child recorded its stop.
	Overlaps int
	// AfterExpiry: crash only, leaderrun only: the dead holder's lease
	// expiry (read from the store right after the kill) → the next child's
	// start. This is the detection delay that docs/design.md §8 allows 250 ms for,
	// whatever the phase of the kill.
	AfterExpiry []time.Duration
	// Remaining: the dead holder's lease time left at the kill.
	Remaining []time.Duration
	// TokenNotIncreasing counts hand-overs whose new LEADERRUN_TOKEN was
	// not greater than the previous one (leaderrun only).
	TokenNotIncreasing int
	// LockConflicts counts next children that found the previous child's
	// lock still held: the old child was alive when the new one started.
	LockConflicts int
	Failed        int
	Notes         []string
}

func (r *failoverResult) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// runFailover starts replicas of c, then runs times: kill the holder
// (SIGTERM for "handoff", SIGKILL for "crash"), time the next child's start,
// replace the killed replica. It stops every process it started.
func (b *bench) runFailover(c *contender, mode string, runs, replicas int) *failoverResult {
	res := &failoverResult{C: c, Mode: mode, TTL: c.TTL}
	s, err := b.startScenario(c, mode, replicas)
	if s != nil {
		defer s.close()
	}
	if err != nil {
		res.note("%v", err)
		return res
	}
	if mode == "crash" && c.DSN != "" {
		if err := s.openStore(); err != nil {
			res.note("open the store to read expiries: %v", err)
		}
	}
	for run := 0; run < runs && !b.stopping(); run++ {
		if err := s.once(res); err != nil {
			res.Failed++
			res.note("run %d: %v", run, err)
			return res
		}
		b.progress("%s %s run %d/%d: %v", c.Label, mode, run+1, runs, res.Latency[len(res.Latency)-1].Round(time.Microsecond))
	}
	return res
}

// scenario is one group of replicas of a contender, campaigning for one
// name, that runFailover stops and replaces run after run.
type scenario struct {
	b       *bench
	c       *contender
	mode    string // "handoff" or "crash"
	name    string
	dir     string // where the children record
	w       *watcher
	live    map[int]*proc // the replicas still running, by pid
	started []*proc
	cur     mark          // the running child's start
	curPid  int           // its pid in the benchmark's namespace
	store   lease.Store   // crash runs on leaderrun: to read the lease's time left
	timeout time.Duration // how long to wait for the next child
}

// startScenario starts replicas of c, the first until its child runs, the
// others until they stand by. The scenario it returns, even with an error,
// must be closed.
func (b *bench) startScenario(c *contender, mode string, replicas int) (*scenario, error) {
	s := &scenario{b: b, c: c, mode: mode, name: fmt.Sprintf("bench-%s-%d", mode, rand.IntN(1<<30)),
		live: map[int]*proc{}, timeout: 15 * time.Second}
	if mode == "crash" {
		s.timeout = 2*c.TTL + 15*time.Second
	}
	var err error
	if s.dir, err = os.MkdirTemp(b.tmp, sanitize(c.Label+"-"+mode)+"-"); err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	if s.w, err = newWatcher(s.dir); err != nil {
		return nil, err
	}
	first, err := s.spawn()
	if err != nil {
		return s, err
	}
	cur, ok := s.w.nextStart(30 * time.Second)
	if !ok {
		return s, fmt.Errorf("the first replica's child did not start within 30s (log: %s)", first.label)
	}
	s.running(cur)
	for i := 1; i < replicas; i++ {
		if err := s.replace(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// openStore opens c's store, from which crash runs read the time the
// killed holder's lease had left.
func (s *scenario) openStore() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	s.store, err = lease.Open(ctx, s.c.DSN)
	return err
}

// close kills every replica the scenario started and waits for them.
func (s *scenario) close() {
	for _, p := range s.started {
		if !p.exited() {
			p.killGroup(syscall.SIGKILL)
		}
	}
	for _, p := range s.started {
		p.wait(5 * time.Second)
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.w != nil {
		s.w.close()
	}
}

func (s *scenario) spawn() (*proc, error) {
	p, err := s.c.spawn(s.name, s.dir, len(s.started))
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	s.started = append(s.started, p)
	s.live[p.pid] = p
	return p, nil
}

// replace starts a replica and waits until it stands by.
func (s *scenario) replace() error {
	p, err := s.spawn()
	if err != nil {
		return err
	}
	if err := s.c.standby(s.name, p, len(s.live), 30*time.Second); err != nil {
		return fmt.Errorf("standby: %w", err)
	}
	return nil
}

// running records m as the running child's start.
func (s *scenario) running(m mark) {
	s.cur, s.curPid = m, hostPid(m)
	s.b.procs.noteChild(s.curPid)
}

// once runs one hand-over: a random pause with the direct-start baseline
// in its middle, the holder stopped (or killed), the next child's start
// timed and judged, the holder replaced.
func (s *scenario) once(res *failoverResult) error {
	// A random pause: samples the follower's poll phase (hand-off)
	// and the holder's renew phase (crash) uniformly.
	pause := 100*time.Millisecond + rand.N(100*time.Millisecond)
	if s.mode == "crash" {
		pause = 200*time.Millisecond + rand.N(s.c.Period)
	}
	// The baseline in the pause's middle, not at its start: there the
	// replica that replaced the last holder had only just stood by, and a
	// new leaderrun replica may still be starting (its connections, its
	// prepared start), which slowed the same child's start in leaderrun's
	// blocks and not in the peer's (bench/findings.md).
	time.Sleep(pause / 2)
	if d, err := s.b.directStart(s.dir, s.w); err == nil {
		res.Direct = append(res.Direct, d)
	}
	time.Sleep(pause - pause/2)
	s.w.drainStarts()

	holder := replicaOf(s.cur, s.live)
	if holder == nil {
		return fmt.Errorf("the running child (holder %q, parent %d) is no replica's", s.cur.Holder, s.cur.Ppid)
	}
	t0 := mono.Now()
	if s.mode == "handoff" {
		s.c.stopHolder(holder)
	} else {
		syscall.Kill(holder.pid, syscall.SIGKILL)
	}
	remaining := s.leaseLeft(t0)
	next, ok := s.w.nextStart(s.timeout)
	if !ok {
		return fmt.Errorf("no next child within %v", s.timeout)
	}
	res.Latency = append(res.Latency, time.Duration(next.At-t0))
	res.Detect = append(res.Detect, time.Duration(next.Detected-t0))
	if remaining >= 0 {
		res.Remaining = append(res.Remaining, remaining)
		res.AfterExpiry = append(res.AfterExpiry, time.Duration(next.At-t0)-remaining)
	}
	s.judge(res, next, t0)
	if holder.wait(s.timeout) {
		res.HolderExit = append(res.HolderExit, time.Duration(holder.exitAt-t0))
	} else {
		res.note("the killed holder %s had not exited after %v", holder.label, s.timeout)
		holder.killGroup(syscall.SIGKILL)
	}
	oldPid := s.curPid
	s.running(next)
	if s.mode == "crash" && pidAlive(oldPid) {
		time.Sleep(time.Second)
		if pidAlive(oldPid) {
			res.OldChildStillRunning++
			// The orphan: in its holder's process group still.
			holder.killGroup(syscall.SIGKILL)
			syscall.Kill(oldPid, syscall.SIGKILL)
		}
	}
	delete(s.live, holder.pid)
	if err := s.replace(); err != nil {
		return fmt.Errorf("replacement: %w", err)
	}
	return nil
}

// leaseLeft reads the time the killed holder's lease had left at t0 (the
// kill), for crash runs; -1 when it is not read.
func (s *scenario) leaseLeft(t0 int64) time.Duration {
	switch {
	case s.store != nil:
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		tq := mono.Now()
		if rec, err := s.store.Get(ctx, s.name); err == nil && rec.Held() {
			return rec.Remaining + time.Duration(tq-t0)
		}
	case s.mode == "crash" && s.c.leaseLeft != nil:
		tq := mono.Now()
		if left, err := s.c.leaseLeft(s.name); err == nil {
			return left + time.Duration(tq-t0)
		}
	}
	return -1
}

// judge counts what went wrong in the hand-over from s.cur to next, begun
// at t0: a token that did not increase, the old child alive (or still
// holding its lock) when the next one started, an overlap of the two.
func (s *scenario) judge(res *failoverResult, next mark, t0 int64) {
	if s.c.Tool == "leaderrun" {
		prev, err1 := strconv.ParseInt(s.cur.Token, 10, 64)
		tok, err2 := strconv.ParseInt(next.Token, 10, 64)
		if err1 != nil || err2 != nil || tok <= prev {
			res.TokenNotIncreasing++
		}
	}
	if next.Lock == "0" {
		res.LockConflicts++
	}
	if pidAlive(s.curPid) {
		res.OldChildAlive++
	}
	if s.mode == "handoff" {
		stop, ok := s.w.stopOf(s.cur, time.Second)
		if ok {
			res.Told = append(res.Told, time.Duration(stop.At-t0))
		}
		if ok && stop.At > next.At {
			res.Overlaps++
		}
	}
}

// directStart spawns benchchild -mode exit directly and returns the time
// from just before fork to the child's own start reading: the floor that
// any supervisor adds to.
func (b *bench) directStart(dir string, w *watcher) (time.Duration, error) {
	sub := filepath.Join(dir, "direct")
	os.MkdirAll(sub, 0o755)
	t0 := mono.Now()
	p, err := b.procs.start("direct", []string{b.childBin, "-dir", sub, "-mode", "exit"}, nil)
	if err != nil {
		return 0, err
	}
	if !p.wait(10 * time.Second) {
		p.killGroup(syscall.SIGKILL)
		return 0, fmt.Errorf("direct child did not exit")
	}
	entries, err := os.ReadDir(sub)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("start-%d-", p.pid)) {
			m, err := readMark(filepath.Join(sub, e.Name()))
			os.Remove(filepath.Join(sub, e.Name()))
			if err != nil {
				return 0, err
			}
			return time.Duration(m.At - t0), nil
		}
	}
	return 0, fmt.Errorf("direct child left no start mark")
}
