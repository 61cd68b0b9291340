package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// stepResult holds one store's planned hand-overs: `leaderrun step-down
// --wait` against a leader with two standbys.
type stepResult struct {
	Store string
	// Latency: the step-down command's fork → the new child's own start
	// reading.
	Latency []time.Duration
	// Noticed: fork → the old child got its stop signal (the leader
	// noticed the request and began stopping).
	Noticed []time.Duration
	// CmdExit: fork → `step-down --wait` exited, having seen the new
	// holder.
	CmdExit []time.Duration
	// Overlaps: the new child started before the old one recorded its
	// stop; LockConflicts: the new child found the old one's lock held.
	Overlaps, LockConflicts int
	TokenNotIncreasing      int
	SameReplica             int // the name came back to the replica that stepped down
	Failed                  int
	Notes                   []string
}

// verdict: the new child ran, and step-down --wait reported it, within
// targetStepDownP50 at p50.
func (s *stepResult) verdict() bool {
	return summarize(s.Latency).P50 <= targetStepDownP50 && summarize(s.CmdExit).P50 <= targetStepDownP50
}

func (r *stepResult) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// runStepDown starts three replicas at default timings on a fresh
// namespace of st and asks the leader to step down runs times, each after
// a random pause of up to one renew interval (the request's phase relative
// to the leader's renewals).
func (b *bench) runStepDown(st *store, dsn string, runs int) *stepResult {
	res := &stepResult{Store: st.Name}
	c := b.leaderrunContender(st.Label(), st.Name, dsn, defTTL, defPeriod)
	name := fmt.Sprintf("bench-stepdown-%d", rand.IntN(1<<30))
	dir, err := os.MkdirTemp(b.tmp, sanitize(st.Name+"-stepdown")+"-")
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
	var reps []*proc
	defer func() { stopAll(reps, 15*time.Second) }()
	p, err := c.spawn(name, dir, 0)
	if err != nil {
		res.note("spawn: %v", err)
		return res
	}
	reps = append(reps, p)
	cur, ok := w.nextStart(30 * time.Second)
	if !ok {
		res.note("the first replica's child did not start within 30s")
		return res
	}
	b.procs.noteChild(hostPid(cur))
	for i := 1; i < 3; i++ {
		p, err := c.spawn(name, dir, i)
		if err != nil {
			res.note("spawn: %v", err)
			return res
		}
		reps = append(reps, p)
		if err := c.standby(name, p, i+1, 30*time.Second); err != nil {
			res.note("standby: %v", err)
			return res
		}
	}
	for run := 0; run < runs && !b.stopping(); run++ {
		time.Sleep(200*time.Millisecond + rand.N(defPeriod))
		w.drainStarts()
		argv := []string{b.lrBin, "step-down", "--store", dsn, "--wait", "--timeout", "30s", name}
		t0 := mono.Now()
		sd, err := b.procs.start(fmt.Sprintf("stepdown-%s", st.Name), argv, nil)
		if err != nil {
			res.note("run %d: %v", run, err)
			res.Failed++
			return res
		}
		next, ok := w.nextStart(40 * time.Second)
		if !sd.wait(40 * time.Second) {
			sd.killGroup(syscall.SIGKILL)
			res.note("run %d: step-down --wait did not exit within 40s", run)
		} else if !sd.cmd.ProcessState.Success() {
			res.note("run %d: step-down exited %v", run, sd.cmd.ProcessState)
		} else {
			res.CmdExit = append(res.CmdExit, time.Duration(sd.exitAt-t0))
		}
		if !ok {
			res.Failed++
			res.note("run %d: no new child within 40s", run)
			return res
		}
		b.procs.noteChild(hostPid(next))
		res.Latency = append(res.Latency, time.Duration(next.At-t0))
		if stop, ok := w.stopOf(cur, 5*time.Second); ok {
			res.Noticed = append(res.Noticed, time.Duration(stop.At-t0))
			if stop.At > next.At {
				res.Overlaps++
			}
		} else {
			res.note("run %d: the old child recorded no stop", run)
		}
		if next.Lock == "0" {
			res.LockConflicts++
		}
		if next.Holder == cur.Holder {
			res.SameReplica++
		}
		prev, err1 := strconv.ParseInt(cur.Token, 10, 64)
		tok, err2 := strconv.ParseInt(next.Token, 10, 64)
		if err1 != nil || err2 != nil || tok <= prev {
			res.TokenNotIncreasing++
		}
		cur = next
		b.progress("%s step-down run %d/%d: %v", st.Label(), run+1, runs, time.Duration(next.At-t0).Round(time.Microsecond))
	}
	return res
}
