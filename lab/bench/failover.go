package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
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
	name := fmt.Sprintf("bench-%s-%d", mode, rand.IntN(1<<30))
	dir, err := os.MkdirTemp(b.tmp, sanitize(c.Label+"-"+mode)+"-")
	if err != nil {
		res.note("temp dir: %v", err)
		return res
	}
	w, err := newWatcher(dir)
	if err != nil {
		res.note("%v", err)
		return res
	}
	defer w.close()

	live := map[int]*proc{} // replicas by pid
	var started []*proc
	defer func() {
		for _, p := range started {
			if !p.exited() {
				p.killGroup(syscall.SIGKILL)
			}
		}
		for _, p := range started {
			p.wait(5 * time.Second)
		}
	}()
	spawn := func() (*proc, error) {
		p, err := c.spawn(name, dir, len(started))
		if err != nil {
			return nil, err
		}
		started = append(started, p)
		live[p.pid] = p
		return p, nil
	}

	first, err := spawn()
	if err != nil {
		res.note("spawn: %v", err)
		return res
	}
	cur, ok := w.nextStart(30 * time.Second)
	if !ok {
		res.note("the first replica's child did not start within 30s (log: %s)", first.label)
		return res
	}
	b.procs.noteChild(cur.Pid)
	for i := 1; i < replicas; i++ {
		p, err := spawn()
		if err != nil {
			res.note("spawn: %v", err)
			return res
		}
		if err := c.standby(name, p, len(live), 30*time.Second); err != nil {
			res.note("standby: %v", err)
			return res
		}
	}
	timeout := 15 * time.Second
	if mode == "crash" {
		timeout = 2*c.TTL + 15*time.Second
	}
	var store lease.Store
	if mode == "crash" && c.DSN != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		store, err = lease.Open(ctx, c.DSN)
		cancel()
		if err != nil {
			res.note("open the store to read expiries: %v", err)
		} else {
			defer store.Close()
		}
	}

	for run := 0; run < runs && !b.stopping(); run++ {
		// A random pause: samples the follower's poll phase (hand-off)
		// and the holder's renew phase (crash) uniformly.
		pause := 100*time.Millisecond + rand.N(100*time.Millisecond)
		if mode == "crash" {
			pause = 200*time.Millisecond + rand.N(c.Period)
		}
		if d, err := b.directStart(dir, w); err == nil {
			res.Direct = append(res.Direct, d)
		}
		time.Sleep(pause)
		w.drainStarts()

		holder := live[cur.Ppid]
		if holder == nil {
			res.note("run %d: the running child's parent %d is no replica", run, cur.Ppid)
			res.Failed++
			return res
		}
		sig := syscall.SIGKILL
		t0 := mono.Now()
		if mode == "handoff" {
			c.stopHolder(holder)
		} else {
			syscall.Kill(holder.pid, sig)
		}
		remaining := time.Duration(-1)
		if store != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			tq := mono.Now()
			if rec, err := store.Get(ctx, name); err == nil && rec.Held() {
				remaining = rec.Remaining + time.Duration(tq-t0)
			}
			cancel()
		} else if mode == "crash" && c.leaseLeft != nil {
			tq := mono.Now()
			if left, err := c.leaseLeft(name); err == nil {
				remaining = left + time.Duration(tq-t0)
			}
		}
		next, ok := w.nextStart(timeout)
		if !ok {
			res.Failed++
			res.note("run %d: no next child within %v", run, timeout)
			return res
		}
		b.procs.noteChild(next.Pid)
		if c.Tool == "leaderrun" {
			prev, err1 := strconv.ParseInt(cur.Token, 10, 64)
			tok, err2 := strconv.ParseInt(next.Token, 10, 64)
			if err1 != nil || err2 != nil || tok <= prev {
				res.TokenNotIncreasing++
			}
		}
		res.Latency = append(res.Latency, time.Duration(next.At-t0))
		res.Detect = append(res.Detect, time.Duration(next.Detected-t0))
		if remaining >= 0 {
			res.Remaining = append(res.Remaining, remaining)
			res.AfterExpiry = append(res.AfterExpiry, time.Duration(next.At-t0)-remaining)
		}
		if next.Lock == "0" {
			res.LockConflicts++
		}
		oldAlive := pidAlive(cur.Pid)
		if oldAlive {
			res.OldChildAlive++
		}
		if mode == "handoff" {
			if stop, ok := w.stopOf(cur.Pid, time.Second); ok && stop.At > next.At {
				res.Overlaps++
			}
		}
		if holder.wait(timeout) {
			res.HolderExit = append(res.HolderExit, time.Duration(holder.exitAt-t0))
		} else {
			res.note("run %d: the killed holder %s had not exited after %v", run, holder.label, timeout)
			holder.killGroup(syscall.SIGKILL)
		}
		if mode == "crash" && oldAlive {
			time.Sleep(time.Second)
			if pidAlive(cur.Pid) {
				res.OldChildStillRunning++
				// The orphan: in its holder's process group still.
				holder.killGroup(syscall.SIGKILL)
				syscall.Kill(cur.Pid, syscall.SIGKILL)
			}
		}
		delete(live, holder.pid)
		p, err := spawn()
		if err != nil {
			res.note("spawn: %v", err)
			return res
		}
		if err := c.standby(name, p, len(live), 30*time.Second); err != nil {
			res.note("run %d: replacement: %v", run, err)
			return res
		}
		cur = next
		b.progress("%s %s run %d/%d: %v", c.Label, mode, run+1, runs, time.Duration(next.At-t0).Round(time.Microsecond))
	}
	return res
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
		if e.Name() == fmt.Sprintf("start-%d", p.pid) {
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
