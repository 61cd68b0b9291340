package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Faults. All but the outages (faultStoreLeader, and a tagged store's) are
// aimed at one replica: the leader's, or, partitioned, one that holds
// partitions; they hit every tenure it holds.
const (
	faultKill      = "kill"      // SIGKILL its leaderrun, then restart the replica (a join, partitioned)
	faultTerm      = "term"      // SIGTERM its leaderrun, then restart the replica
	faultStop      = "stop"      // SIGSTOP its leaderrun for longer than the TTL, then SIGCONT
	faultReset     = "reset"     // reset its connections to the store for longer than the TTL
	faultBlackhole = "blackhole" // blackhole its connections to the store for longer than the TTL
	// faultKillConn ends its sessions from the server's side
	// (pg_terminate_backend, KILL CONNECTION, CLIENT KILL), once: it may
	// keep its tenures if it reconnects in time.
	faultKillConn = "kill-conn"
	// faultStoreLeader SIGKILLs the etcd member that is etcd's leader and
	// restarts it after a while: every replica is hit, and may keep its
	// tenures while etcd elects another leader.
	faultStoreLeader = "etcd-leader"
)

// transient reports whether a fault may leave the tenures it hit intact:
// a new child is then not required, only allowed.
func transient(kind string) bool { return kind == faultKillConn || isOutage(kind) }

// outage is a fault that makes the store itself unavailable to every
// replica until it heals (healAt): it hits every tenure, and the checks
// for a new child count from the heal.
type outage struct {
	// healed says what healAt is, for reports.
	healed string
	// extension is how much longer than their TTL the store lets leases
	// live after it.
	extension time.Duration
}

// outages are the faults that are outages, by kind; files built with a
// tag add their stores'.
var outages = map[string]outage{
	faultStoreLeader: {healed: "etcd elected a new leader", extension: etcdLeaseExtension},
}

func isOutage(kind string) bool {
	_, ok := outages[kind]
	return ok
}

// Child variants: how the children hit are armed before the fault.
const variantPlain = "plain"

// round is one tenure that a fault hit, and what followed. A fault on a
// partitioned replica is a round per partition it held, all with the same
// number n.
type round struct {
	n       int
	kind    string
	variant string   // how this tenure's child was armed
	part    string   // the partition; "" for the one name
	rep     *replica // the hit tenure's replica generation
	token   int64    // the hit tenure's token
	child   proc
	gchild  proc // zero unless the variant is armEscape
	at      time.Time
	healAt  time.Time // SIGCONT, the proxy passing again, an outage healed (etcd's new leader elected); zero for kill and term
	next    event     // the partition's next child's start
	gotNext bool
	latency time.Duration // at → next.at
	goneIn  time.Duration // healAt or at → the old tenure's last process gone (negative: gone before the heal)
	// wentOn: after a transient fault, the old tenure went on.
	wentOn bool
	// healthEnd: after a transient fault the old tenure went on until its
	// command's failed health checks handed the name over, this long
	// after the fault (zero: they did not).
	healthEnd time.Duration
	gone      *watch // the old tenure's processes, watched from before the fault
	orphans   []proc // the old tenure's processes alive past their deadline (then killed)
	// endedBefore: the old tenure was already over (a renewal failed for
	// the renew deadline, or a hand-off began) when the fault came, so its
	// successor may start early.
	endedBefore bool
	// endSignalled: the successor took the name at the old leader's end
	// signal (package samehost), once the leader's command and its tree
	// were gone: it may start before the old lease could expire.
	endSignalled bool
	// blockedStore: on SQLite, other replicas found the database locked
	// while the replica was frozen; storeBlocked: and the next child
	// started only after the thaw (known limitation L1).
	blockedStore, storeBlocked bool
	skipped                    string // why no fault was injected
	note                       string // what the injection found
	d3                         string // known defect D3 kept a partition from everyone: how
	problems                   []string
}

// leaderWait bounds the wait for a leader (every partition held) at the
// start of a round.
const leaderWait = 30 * time.Second

// fault is one injection, before it is split into rounds.
type fault struct {
	n             int
	kind, variant string
	target        *replica // nil for an outage
	at, healAt    time.Time
	note          string // what the injection found, for the log
	problems      []string
}

// faultTries is how often runRetrying tries a fault that could not be
// injected for a reason of the moment.
const faultTries = 3

// runRetrying runs fault n and tries it again, up to faultTries times in
// all, while it could not be injected for a reason of the moment — the
// leader or a partition moved before the fault, a child did not arm in
// time — so that a busy machine, where partitions settle slowly after the
// previous fault, does not thin the run. A round skipped for a problem (no
// leader at all) is not retried: that is for the checker to see.
func (c *cluster) runRetrying(n int, kind, variant string, rng *rand.Rand) []*round {
	for try := 1; ; try++ {
		rds := c.run(n, kind, variant, rng)
		if try == faultTries || !skippedForNow(rds) {
			return rds
		}
		c.t.Logf("round %d %s/%s: %s; trying again (%d of %d)", n, kind, variant, rds[0].skipped, try+1, faultTries)
	}
}

// skippedForNow reports whether rds is a skipped round whose reason may
// pass: no fault was injected and nothing went wrong.
func skippedForNow(rds []*round) bool {
	return len(rds) == 1 && rds[0].skipped != "" && len(rds[0].problems) == 0 && rds[0].d3 == ""
}

// run injects one fault of kind, the children it hits armed with variant
// first, and follows what happens to each tenure it hit until the old
// tenure is gone and a new child runs.
func (c *cluster) run(n int, kind, variant string, rng *rand.Rand) (rounds []*round) {
	f := &fault{n: n, kind: kind, variant: variant}
	skip := func(why string, problem bool) []*round {
		rd := &round{n: n, kind: kind, variant: variant, skipped: why}
		if problem {
			rd.problems = append(rd.problems, why)
		}
		return []*round{rd}
	}
	held, ok := c.waitHeld(leaderWait)
	d3 := ""
	if !ok {
		if d3 = c.unstick(held); d3 != "" {
			held, ok = c.waitHeld(leaderWait)
		}
	}
	if !ok {
		what := "no leader"
		if c.partitions > 0 {
			what = fmt.Sprintf("only %d of %d partitions had a child", len(held), c.partitions)
		}
		rds := skip(fmt.Sprintf("%s within %v", what, leaderWait), true)
		rds[0].d3 = d3
		return rds
	}
	if d3 != "" {
		defer func() { rounds[0].d3 = d3 }()
	}
	time.Sleep(randDur(rng, 0, 1200*time.Millisecond)) // a random moment of the tenures
	rounds = c.victims(f, rng)
	if len(rounds) == 0 {
		return skip("the leader changed before the fault", false)
	}
	if variant != variantPlain {
		// Partitioned, a random non-empty subset of the children is armed,
		// so that the others show that one partition's stop does not
		// touch another's processes.
		rng.Shuffle(len(rounds), func(i, j int) { rounds[i], rounds[j] = rounds[j], rounds[i] })
		for _, rd := range rounds[:1+rng.IntN(len(rounds))] {
			if !c.arm(rd, variant) {
				return skip(rd.skipped, false)
			}
			rd.variant = variant
		}
		slices.SortFunc(rounds, func(a, b *round) int { return strings.Compare(a.part, b.part) })
		time.Sleep(randDur(rng, 0, 300*time.Millisecond))
	}
	// Partitions that moved meanwhile are not hit.
	cur := c.held()
	rounds = slices.DeleteFunc(rounds, func(rd *round) bool {
		e, ok := cur[rd.part]
		return !ok || e.token != rd.token || e.pid != rd.child.pid
	})
	if len(rounds) == 0 {
		return skip("the leader changed before the fault", false)
	}
	quit := make(chan struct{})
	defer close(quit)
	for _, rd := range rounds {
		old := []proc{rd.child}
		if rd.gchild.pid != 0 {
			old = append(old, rd.gchild)
		}
		rd.gone = watchGone(old, quit)
	}
	c.inject(f, rng)
	if f.note == "nothing" {
		return skip("the fault found nothing to hit: "+strings.Join(f.problems, "; "), false)
	}
	for _, rd := range rounds {
		rd.at, rd.healAt, rd.note = f.at, f.healAt, f.note
	}
	rounds[0].problems = append(rounds[0].problems, f.problems...)
	var wg sync.WaitGroup
	for _, rd := range rounds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.follow(rd)
		}()
	}
	wg.Wait()
	blocked := c.store == "sqlite" && kind == faultStop && c.storeBlockedDuring(f.target, f.at, f.healAt)
	for _, rd := range rounds {
		rd.endedBefore = tenureEndedBefore(rd.rep.logPath, rd.part, rd.token, rd.at)
		rd.endSignalled = rd.part == "" && c.tookAtEndSignal(rd.token)
		rd.blockedStore = blocked
		rd.storeBlocked = blocked && rd.gotNext && rd.next.time().After(rd.healAt)
	}
	return rounds
}

// victims picks the fault's target and returns a round for each tenure it
// hits: the leader's, or every partition one replica holds (a random one
// of those holding any), or, for an outage, every partition.
func (c *cluster) victims(f *fault, rng *rand.Rand) []*round {
	held := c.held()
	byRep := map[*replica][]event{}
	var reps []*replica
	for _, e := range held {
		r := c.replicaOf(e.kv["holder"])
		if byRep[r] == nil {
			reps = append(reps, r)
		}
		byRep[r] = append(byRep[r], e)
	}
	if len(reps) == 0 {
		return nil
	}
	slices.SortFunc(reps, func(a, b *replica) int { return a.idx - b.idx })
	var hit []event
	if isOutage(f.kind) {
		for _, r := range reps {
			hit = append(hit, byRep[r]...)
		}
	} else {
		f.target = reps[rng.IntN(len(reps))]
		hit = byRep[f.target]
	}
	var rounds []*round
	for _, e := range hit {
		rounds = append(rounds, &round{
			n: f.n, kind: f.kind, variant: variantPlain, part: e.part,
			rep: c.replicaOf(e.kv["holder"]), token: e.token,
			child: proc{e.pid, uint64(e.int("stime")), "child", e.token},
		})
	}
	slices.SortFunc(rounds, func(a, b *round) int { return strings.Compare(a.part, b.part) })
	return rounds
}

// arm makes rd's child ignore SIGTERM or start an escaping grandchild, and
// waits until it says it did.
// A child that an earlier (transient) fault armed so already is armed.
func (c *cluster) arm(rd *round, variant string) bool {
	mine := func(e event) bool { return e.token == rd.token && e.part == rd.part }
	from := 0
	if !slices.ContainsFunc(c.log.snapshot(), func(e event) bool {
		return e.kind == "armed" && mine(e) && e.kv["what"] == variant
	}) {
		from = len(c.log.snapshot())
		if err := os.WriteFile(controlFile(c.dir, rd.part, rd.token), []byte(variant+"\n"), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	armed, ok := c.log.waitEvent(from, deadline, func(e event) bool {
		return e.kind == "armed" && mine(e) && e.kv["what"] == variant
	})
	if !ok {
		rd.skipped = "the child did not arm (leader changed?)"
		return false
	}
	if variant == armEscape {
		g, ok := c.log.waitEvent(from, deadline, func(e event) bool {
			return e.kind == "gstart" && mine(e)
		})
		if !ok || g.pid != int(armed.int("gpid")) {
			rd.skipped = "the grandchild did not start"
			return false
		}
		rd.gchild = proc{g.pid, uint64(g.int("stime")), "grandchild", g.token}
	}
	return true
}

// inject performs the fault.
func (c *cluster) inject(f *fault, rng *rand.Rand) {
	r := f.target
	cut := c.timing.ttl + randDur(rng, 500*time.Millisecond, 1500*time.Millisecond)
	switch f.kind {
	case faultKill:
		r.want, r.wantWhy = []string{"signal: killed"}, "SIGKILLed"
		f.at = time.Now()
		r.signal(syscall.SIGKILL)
		c.replace(f, 5*time.Second)
	case faultTerm:
		r.want, r.wantWhy = c.expectTerm(r)
		f.at = time.Now()
		r.signal(syscall.SIGTERM)
		c.replace(f, c.timing.grace+10*time.Second)
	case faultStop:
		f.at = time.Now()
		r.signal(syscall.SIGSTOP)
		time.Sleep(cut)
		r.signal(syscall.SIGCONT)
		f.healAt = time.Now()
	case faultReset, faultBlackhole:
		ps := c.proxies[r.idx]
		f.at = time.Now()
		for _, p := range ps {
			if f.kind == faultReset {
				p.Reset()
			} else {
				p.Blackhole()
			}
		}
		time.Sleep(cut)
		for _, p := range ps {
			p.Pass()
		}
		f.healAt = time.Now()
	case faultKillConn:
		f.at = time.Now()
		n, err := c.killSessions(r.idx)
		f.healAt = time.Now()
		switch {
		case err != nil:
			f.problems = append(f.problems, fmt.Sprintf("end %s's sessions: %v", r.identity, err))
		case n == 0:
			f.note, f.problems = "nothing", append(f.problems, fmt.Sprintf("%s had no sessions", r.identity))
		default:
			f.note = fmt.Sprintf("%d sessions ended", n)
		}
	case faultStoreLeader:
		var err error
		f.at, f.healAt, err = c.killEtcdLeader(randDur(rng, 200*time.Millisecond, c.timing.ttl))
		if err != nil {
			f.problems = append(f.problems, err.Error())
		}
		if f.at.IsZero() {
			f.note = "nothing"
		}
	default:
		inject, ok := c.injectors[f.kind]
		if !ok {
			c.t.Fatalf("unknown fault %q", f.kind)
		}
		inject(f, rng)
	}
}

// replace waits for the signalled replica to exit and starts its next
// generation.
func (c *cluster) replace(f *fault, d time.Duration) {
	r := f.target
	if !r.waitExit(d) {
		f.problems = append(f.problems, fmt.Sprintf("replica %s did not exit within %v of %v", r.identity, d, r.stopSig))
		c.awaitOrKill(r, 0)
	}
	next := c.startReplica(r.idx)
	if !awaitLog(next.logPath, 10*time.Second) {
		f.problems = append(f.problems, fmt.Sprintf("replica %s logged nothing within 10s of its start", next.identity))
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

// follow waits for the partition's next child and for the old tenure's
// processes to end, and kills those that outlive their deadline. After a
// transient fault the old tenure may go on: then it waits for a new child
// only until the old tenure would have been stopped had it been lost.
func (c *cluster) follow(rd *round) {
	base := rd.at
	if !rd.healAt.IsZero() {
		base = rd.healAt
	}
	// By then the old leaderrun stopped the child (G + K), or it is dead.
	deadline := base.Add(c.timing.deadline + c.timing.grace + 2*time.Second)
	limit := rd.at.Add(4*c.timing.ttl + c.timing.reconcile + 10*time.Second)
	if transient(rd.kind) {
		limit = deadline
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		c.awaitOld(rd, base, deadline)
	}()
	next := func(e event) bool { return e.kind == "start" && e.part == rd.part && e.token > rd.token }
	rd.next, rd.gotNext = c.log.waitEvent(0, limit, next)
	if !rd.gotNext && transient(rd.kind) {
		<-gone
		if !rd.wentOn { // the tenure ended after all: a successor is due
			limit = rd.at.Add(4*c.timing.ttl + c.timing.reconcile + 10*time.Second)
			rd.next, rd.gotNext = c.log.waitEvent(0, limit, next)
		}
	}
	<-gone
	rd.survived(base)
	switch {
	case rd.gotNext:
		rd.latency = rd.next.time().Sub(rd.at)
	case rd.wentOn:
	case c.stuck(rd.part) != nil:
		rd.d3 = fmt.Sprintf("no new child within %v of the fault: the partition is stuck", limit.Sub(rd.at))
	default:
		rd.problems = append(rd.problems, fmt.Sprintf("no new child within %v of the fault", limit.Sub(rd.at)))
	}
}

// healthHandOverMsg is a leader's log line for a hand-over that its
// command's failed health checks began.
const healthHandOverMsg = "command unhealthy; handing the name over"

// survived counts a tenure that a transient fault hit and its command's
// health checks ended later (the flap of -chaos.health-flap, at random)
// as one that went on: the fault did not end it, and the change that
// followed is not the fault's to answer for. The bound of a new child
// after the fault would otherwise hold a hand-over begun seconds later,
// which may wait out a reservation for a successor that is gone. How long
// the name then goes without a child, checkGaps bounds, whatever the
// cause.
func (rd *round) survived(base time.Time) {
	if !transient(rd.kind) || rd.wentOn {
		return
	}
	for _, l := range readLog(rd.rep.logPath) {
		if l.Token == rd.token && l.of(rd.part) && l.Msg == healthHandOverMsg && l.Time.After(base) {
			rd.wentOn, rd.gotNext, rd.healthEnd = true, false, l.Time.Sub(rd.at)
			return
		}
	}
}

// watch follows a tenure's processes until they are all gone.
type watch struct {
	done chan struct{} // closed once they are gone
	at   time.Time     // when they were first seen gone; set before done closes
}

// watchGone polls ps until they are all gone, or quit closes.
func watchGone(ps []proc, quit <-chan struct{}) *watch {
	w := &watch{done: make(chan struct{})}
	go func() {
		for {
			if len(alive(ps)) == 0 {
				w.at = time.Now()
				close(w.done)
				return
			}
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return w
}

// awaitOld waits for the old tenure's processes to end, and kills those
// alive at deadline — unless the tenure went on after a transient fault.
func (c *cluster) awaitOld(rd *round, base, deadline time.Time) {
	select {
	case <-rd.gone.done:
		rd.goneIn = rd.gone.at.Sub(base)
		return
	case <-time.After(time.Until(deadline)):
	}
	if transient(rd.kind) && !c.replaced(rd) {
		rd.wentOn = true
		return
	}
	old := []proc{rd.child}
	if rd.gchild.pid != 0 {
		old = append(old, rd.gchild)
	}
	rd.orphans = alive(old)
	for _, p := range rd.orphans {
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// replaced reports whether a later tenure of rd's partition started.
func (c *cluster) replaced(rd *round) bool {
	e, ok := c.log.latestStarts()[rd.part]
	return ok && e.token > rd.token
}

// logLine is what the suite reads of a replica's JSON log line.
type logLine struct {
	Time        time.Time `json:"time"`
	Msg         string    `json:"msg"`
	Token       int64     `json:"token"`
	Partition   *int      `json:"partition"`
	Status      string    `json:"status"`
	LeaderToken int64     `json:"leader_token"`
}

// readLog parses a replica's JSON log, skipping lines that are not JSON.
func readLog(path string) []logLine {
	data, _ := os.ReadFile(path)
	var out []logLine
	for _, line := range strings.Split(string(data), "\n") {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// of reports whether the line is about partition part ("" for the one
// name).
func (l logLine) of(part string) bool {
	if l.Partition == nil {
		return part == ""
	}
	return fmt.Sprint(*l.Partition) == part
}

// tenureEnds are the log lines that say a tenure is over, or its end has
// begun.
var tenureEnds = []string{
	"tenure ended; stopping command", "handing partition off", "stepping down from partition",
	"handing partition off: leaving",
}

// tenureEndedBefore reports whether a replica's log says that the tenure of
// token (of partition part) ended before at.
func tenureEndedBefore(logPath, part string, token int64, at time.Time) bool {
	for _, l := range readLog(logPath) {
		if l.Token == token && l.of(part) && slices.Contains(tenureEnds, l.Msg) {
			return l.Time.Before(at)
		}
	}
	return false
}

// endSignalMsgs are a replica's log lines for a takeover at the leader's
// end signal (package samehost): at its word that it is stopping its
// command (the successor's command starts once that one is gone), and at
// its word that its tenure ended.
var endSignalMsgs = []string{
	"took over the lease from the leader on this host, which is stopping its command; ours starts once that one is gone",
	"took over the lease at once from the leader on this host, which ended its tenure",
}

// tookAtEndSignal reports whether a replica's log says that it took the
// one name over from the tenure of token at that tenure's end signal.
func (c *cluster) tookAtEndSignal(token int64) bool {
	for _, r := range c.all {
		for _, l := range readLog(r.logPath) {
			if slices.Contains(endSignalMsgs, l.Msg) && l.LeaderToken == token {
				return true
			}
		}
	}
	return false
}

// unreleasedMsg is a replica's log line for a tenure whose release failed.
const unreleasedMsg = "tenure over; could not release the lease, it expires on its own"

// unreleased returns, from the replicas' logs, every partition's tenure
// whose release failed, with the replica that held it.
func (c *cluster) unreleased() map[tkey]*replica {
	out := map[tkey]*replica{}
	for _, r := range c.all {
		for _, l := range readLog(r.logPath) {
			if l.Msg == unreleasedMsg && l.Partition != nil {
				out[tkey{strconv.Itoa(*l.Partition), l.Token}] = r
			}
		}
	}
	return out
}

// stuck returns the replica that keeps partition part from everyone by
// known defect D3, or nil: on a partitioned etcd run, the partition's
// latest child is gone, that tenure's release failed, and the replica that
// held it still runs.
func (c *cluster) stuck(part string) *replica {
	if c.store != "etcd" || c.partitions == 0 {
		return nil
	}
	latest, ok := c.log.latestStarts()[part]
	if !ok || aliveAs(latest.pid, uint64(latest.int("stime"))) {
		return nil
	}
	if r := c.unreleased()[tkey{part, latest.token}]; r != nil && !r.exited() {
		return r
	}
	return nil
}

// unstick restarts the replicas that keep partitions from everyone by
// known defect D3, when those are all the partitions without a child
// (held lists those with one), so that the run goes on; it says what it
// did, or returns "" when some partition lacks a child for another reason.
func (c *cluster) unstick(held map[string]event) string {
	var parts []string
	var reps []*replica
	for _, part := range c.parts() {
		if _, ok := held[part]; ok {
			continue
		}
		r := c.stuck(part)
		if r == nil {
			return ""
		}
		parts = append(parts, part)
		if !slices.Contains(reps, r) {
			reps = append(reps, r)
		}
	}
	if len(reps) == 0 {
		return ""
	}
	var ids []string
	for _, r := range reps {
		ids = append(ids, r.identity)
		c.terminate(r)
		c.awaitOrKill(r, c.timing.grace+10*time.Second)
		awaitLog(c.startReplica(r.idx).logPath, 10*time.Second)
	}
	return fmt.Sprintf("partitions %s without a child, held by the failed releases of %s: restarted them",
		strings.Join(parts, ", "), strings.Join(ids, ", "))
}

// storeUnavailable are the log lines of a replica that found the store
// unusable.
var storeUnavailable = []string{
	"store unavailable; retrying",
	"store unreachable; retrying",
	"renew failed; will retry",
	"renewal round failed; trust in every partition ends at the renew deadline unless one succeeds",
	"cannot acquire partition; will retry",
}

// storeError is one log line of a replica that found the store unusable.
type storeError struct {
	at  time.Time
	rep *replica
}

// storeErrors lists the store errors the replicas logged.
func (c *cluster) storeErrors() []storeError {
	var out []storeError
	for _, r := range c.all {
		for _, l := range readLog(r.logPath) {
			if slices.Contains(storeUnavailable, l.Msg) {
				out = append(out, storeError{l.Time, r})
			}
		}
	}
	return out
}

// storeBlockedDuring reports whether a replica other than r logged that
// the store was unavailable between from and to.
func (c *cluster) storeBlockedDuring(r *replica, from, to time.Time) bool {
	for _, o := range c.all {
		if o == r {
			continue
		}
		for _, l := range readLog(o.logPath) {
			if slices.Contains(storeUnavailable, l.Msg) && l.Time.After(from) && l.Time.Before(to) {
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
