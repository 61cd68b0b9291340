package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"
)

// Faults, each aimed at the current leader.
const (
	faultKill      = "kill"      // SIGKILL its leaderrun, then restart the replica
	faultTerm      = "term"      // SIGTERM its leaderrun, then restart the replica
	faultStop      = "stop"      // SIGSTOP its leaderrun for longer than the TTL, then SIGCONT
	faultReset     = "reset"     // reset its connections to PostgreSQL for longer than the TTL
	faultBlackhole = "blackhole" // blackhole its connections to PostgreSQL for longer than the TTL
)

// Child variants: how the leader's child is armed before the fault.
const variantPlain = "plain"

// round is one injected fault and what followed.
type round struct {
	n       int
	kind    string
	variant string
	rep     *replica // the leader's replica generation
	token   int64    // the leader's token
	child   proc
	gchild  proc // zero unless the variant is armEscape
	at      time.Time
	healAt  time.Time // SIGCONT or the proxy passing again; zero for kill and term
	next    event     // the next child's start
	gotNext bool
	latency time.Duration // at → next.at
	goneIn  time.Duration // healAt or at → the old tenure's last process gone
	orphans []proc        // the old tenure's processes alive past their deadline (then killed)
	// endedBefore: the old leader had already given up the tenure (a
	// renewal failed for the renew deadline) when the fault came, so its
	// successor may start early.
	endedBefore bool
	// storeBlocked: on SQLite, the followers found the database locked
	// while the leader was frozen, and the next child started only after
	// the thaw (known limitation L1).
	storeBlocked bool
	skipped      string // why no fault was injected
	problems     []string
}

// leaderWait bounds the wait for a leader at the start of a round.
const leaderWait = 30 * time.Second

// run injects one fault of kind into the current leader, its child armed
// with variant first, and follows what happens until the old tenure is gone
// and a new child runs.
func (c *cluster) run(n int, kind, variant string, rng *rand.Rand) *round {
	rd := &round{n: n, kind: kind, variant: variant}
	lead, rep, ok := c.waitLeader(leaderWait)
	if !ok {
		rd.skipped = fmt.Sprintf("no leader within %v", leaderWait)
		rd.problems = append(rd.problems, rd.skipped)
		return rd
	}
	time.Sleep(randDur(rng, 0, 1200*time.Millisecond)) // a random moment of the tenure
	if variant != variantPlain {
		if !c.arm(rd, lead, variant) {
			return rd
		}
		time.Sleep(randDur(rng, 0, 300*time.Millisecond))
	}
	if cur, _, ok := c.leader(); !ok || cur.token != lead.token {
		rd.skipped = "the leader changed before the fault"
		return rd
	}
	rd.rep, rd.token = rep, lead.token
	rd.child = proc{lead.pid, uint64(lead.int("stime")), "child", lead.token}
	c.inject(rd, rng)
	c.follow(rd)
	rd.endedBefore = tenureEndedBefore(rep.logPath, rd.token, rd.at)
	rd.storeBlocked = c.store == "sqlite" && rd.kind == faultStop && rd.gotNext &&
		rd.next.time().After(rd.healAt) && c.followersBlocked(rd)
	return rd
}

// arm makes the leader's child ignore SIGTERM or start an escaping
// grandchild, and waits until it says it did.
func (c *cluster) arm(rd *round, lead event, variant string) bool {
	from := len(c.log.snapshot())
	if err := os.WriteFile(controlFile(c.dir, lead.token), []byte(variant+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	armed, ok := c.log.waitEvent(from, deadline, func(e event) bool {
		return e.kind == "armed" && e.token == lead.token && e.kv["what"] == variant
	})
	if !ok {
		rd.skipped = "the child did not arm (leader changed?)"
		return false
	}
	if variant == armEscape {
		g, ok := c.log.waitEvent(from, deadline, func(e event) bool {
			return e.kind == "gstart" && e.token == lead.token
		})
		if !ok || g.pid != int(armed.int("gpid")) {
			rd.skipped = "the grandchild did not start"
			return false
		}
		rd.gchild = proc{g.pid, uint64(g.int("stime")), "grandchild", g.token}
	}
	return true
}

// inject performs the fault on rd.rep.
func (c *cluster) inject(rd *round, rng *rand.Rand) {
	r := rd.rep
	cut := c.timing.ttl + randDur(rng, 500*time.Millisecond, 1500*time.Millisecond)
	switch rd.kind {
	case faultKill:
		r.want, r.wantWhy = []string{"signal: killed"}, "SIGKILLed"
		rd.at = time.Now()
		r.signal(syscall.SIGKILL)
		c.replace(rd, 5*time.Second)
	case faultTerm:
		r.want, r.wantWhy = c.expectTerm(r)
		rd.at = time.Now()
		r.signal(syscall.SIGTERM)
		c.replace(rd, c.timing.grace+10*time.Second)
	case faultStop:
		rd.at = time.Now()
		r.signal(syscall.SIGSTOP)
		time.Sleep(cut)
		r.signal(syscall.SIGCONT)
		rd.healAt = time.Now()
	case faultReset, faultBlackhole:
		p := c.proxies[r.idx]
		rd.at = time.Now()
		if rd.kind == faultReset {
			p.Reset()
		} else {
			p.Blackhole()
		}
		time.Sleep(cut)
		p.Pass()
		rd.healAt = time.Now()
	default:
		c.t.Fatalf("unknown fault %q", rd.kind)
	}
}

// replace waits for the signalled replica to exit and starts its next
// generation.
func (c *cluster) replace(rd *round, d time.Duration) {
	r := rd.rep
	if !r.waitExit(d) {
		rd.problems = append(rd.problems, fmt.Sprintf("replica %s did not exit within %v of %v", r.identity, d, r.stopSig))
		c.awaitOrKill(r, 0)
	}
	next := c.startReplica(r.idx)
	if !awaitLog(next.logPath, 10*time.Second) {
		rd.problems = append(rd.problems, fmt.Sprintf("replica %s logged nothing within 10s of its start", next.identity))
	}
}

// awaitLog waits until a replica has logged a line: by then it handles
// stop signals (it subscribes before anything else), so a SIGTERM cannot
// kill it by the default action.
func awaitLog(path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// follow waits for the next child and for the old tenure's processes to
// end, and kills those that outlive their deadline.
func (c *cluster) follow(rd *round) {
	limit := 4*c.timing.ttl + 10*time.Second
	rd.next, rd.gotNext = c.log.waitEvent(0, rd.at.Add(limit), func(e event) bool {
		return e.kind == "start" && e.token > rd.token
	})
	if rd.gotNext {
		rd.latency = rd.next.time().Sub(rd.at)
	} else {
		rd.problems = append(rd.problems, fmt.Sprintf("no new child within %v of the fault", limit))
	}
	base := rd.at
	if !rd.healAt.IsZero() {
		base = rd.healAt
	}
	// By then the old leaderrun stopped the child (G + K), or it is dead.
	deadline := base.Add(c.timing.deadline + c.timing.grace + 2*time.Second)
	old := []proc{rd.child}
	if rd.gchild.pid != 0 {
		old = append(old, rd.gchild)
	}
	for {
		alive := alive(old)
		if len(alive) == 0 {
			rd.goneIn = time.Since(base)
			return
		}
		if time.Now().After(deadline) {
			rd.orphans = alive
			for _, p := range alive {
				syscall.Kill(p.pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tenureEndedBefore reports whether a replica's log says that the tenure of
// token ended before at.
func tenureEndedBefore(logPath string, token int64, at time.Time) bool {
	data, _ := os.ReadFile(logPath)
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Time  time.Time `json:"time"`
			Msg   string    `json:"msg"`
			Token int64     `json:"token"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "tenure ended; stopping command" && l.Token == token {
			return l.Time.Before(at)
		}
	}
	return false
}

// followersBlocked reports whether another replica logged that the store
// was unavailable while rd's fault lasted.
func (c *cluster) followersBlocked(rd *round) bool {
	for _, r := range c.all {
		if r == rd.rep {
			continue
		}
		data, _ := os.ReadFile(r.logPath)
		for _, line := range strings.Split(string(data), "\n") {
			var l struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "store unavailable; retrying" &&
				l.Time.After(rd.at) && l.Time.Before(rd.healAt) {
				return true
			}
		}
	}
	return false
}

func alive(ps []proc) []proc {
	var out []proc
	for _, p := range ps {
		if aliveAs(p.pid, p.stime) {
			out = append(out, p)
		}
	}
	return out
}

func randDur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// schedule lists the faults of a run: the short mode's fixed mix, shuffled,
// or n random ones.
func schedule(store string, n int, rng *rand.Rand) [][2]string {
	var s [][2]string
	if n == 0 {
		s = [][2]string{
			{faultKill, variantPlain}, {faultTerm, variantPlain}, {faultStop, variantPlain},
			{faultTerm, armIgnoreTerm}, {faultStop, armIgnoreTerm},
			{faultTerm, armEscape}, {faultStop, armEscape}, {faultKill, armEscape},
		}
		if store == "postgres" {
			s = append(s, [2]string{faultReset, variantPlain}, [2]string{faultBlackhole, armIgnoreTerm},
				[2]string{faultReset, armEscape})
		}
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		return s
	}
	kinds := []string{faultKill, faultTerm, faultStop}
	if store == "postgres" {
		kinds = append(kinds, faultReset, faultBlackhole)
	}
	for range n {
		v := variantPlain
		switch rng.IntN(4) {
		case 0:
			v = armIgnoreTerm
		case 1:
			v = armEscape
		}
		s = append(s, [2]string{kinds[rng.IntN(len(kinds))], v})
	}
	return s
}
