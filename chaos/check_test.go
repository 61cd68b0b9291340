package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// tenure is what the event log says about one token's processes.
type tenure struct {
	token    int64
	start    event
	pids     map[int]string // pid → "child" or "grandchild"
	pidLast  map[int]int64  // pid → its latest event
	lastSeen int64          // the latest event of any of its processes
	waited   int64          // overlap-end: how long the child waited for the lock; -1 if it never got it
}

// overlap is two tenures whose processes ran at once.
type overlap struct {
	prev, next int64 // tokens
	culprit    string
	dur        time.Duration // how long next's child waited for prev's processes to end; -1 unknown
	class      string        // "frozen", a known defect's id, or "" (a violation)
}

// knownDefect is a violation the suite has diagnosed and reported but
// leaderrun does not fix yet. Violations that match one are counted and
// printed, and fail the run only with -chaos.strict.
type knownDefect struct {
	id, summary string
	// matches reports whether the violation in round rd, by a process of
	// role ("child" or "grandchild"), is this defect.
	// (nil for defects matched elsewhere).
	matches func(rd *round, role string) bool
}

// knownDefects; known_test.go reproduces each one deterministically.
var knownDefects = []knownDefect{{
	id: "D1",
	summary: "a grandchild that escaped the child's process group (setsid) survives SIGKILL of leaderrun: Pdeathsig reaches only the child " +
		"(documented; --pid-namespace removes it, proven in supervise and testdata/script/pidns.txtar)",
	matches: func(rd *round, role string) bool {
		return rd.kind == faultKill && rd.variant == armEscape && role == "grandchild"
	},
}, {
	id: "L1",
	summary: "(limitation, liveness only) SQLite: a leader frozen while it holds the database's write lock " +
		"blocks every follower until it is thawed; the name has no child until then",
}}

func knownDefectOf(rd *round, role string) string {
	if rd == nil {
		return ""
	}
	for _, d := range knownDefects {
		if d.matches != nil && d.matches(rd, role) {
			return d.id
		}
	}
	return ""
}

// result is the checker's verdict on one store's run.
type result struct {
	rounds     []*round
	tenures    []*tenure // in start order
	overlaps   []overlap
	violations []string
	known      map[string]map[int]bool // known defect id → the rounds it occurred in

	// per round (by its token), for the table
	staleAccepted map[int64]int
	staleRefused  map[int64]int
	badExits      map[int64]int
	unplanned     int
	dbWrites      int
}

// check runs every check over a finished run.
func check(evs []event, rounds []*round, reps []*replica, dbw []dbWrite, tm timing, bound time.Duration, survivors []string) *result {
	res := &result{rounds: rounds, known: map[string]map[int]bool{},
		staleAccepted: map[int64]int{}, staleRefused: map[int64]int{}, badExits: map[int64]int{}}
	byToken := map[int64]*round{}
	for _, rd := range rounds {
		if rd.skipped == "" {
			byToken[rd.token] = rd
		}
	}
	res.tenures = tenures(evs)
	res.checkTokens()
	res.checkOverlaps(byToken, tm)
	res.checkWrites(evs, dbw, byToken)
	res.checkRounds(tm, bound)
	res.checkExits(reps, byToken)
	for _, s := range survivors {
		res.violations = append(res.violations, "survived the run: "+s)
	}
	next := map[int64]bool{}
	for _, rd := range rounds {
		if rd.gotNext {
			next[rd.next.token] = true
		}
	}
	for i, t := range res.tenures {
		if i > 0 && !next[t.token] {
			res.unplanned++
		}
	}
	return res
}

func (res *result) addKnown(id string, rd *round) {
	if res.known[id] == nil {
		res.known[id] = map[int]bool{}
	}
	res.known[id][rd.n] = true
}

// tenures groups the events by token, in start order.
func tenures(evs []event) []*tenure {
	by := map[int64]*tenure{}
	var order []*tenure
	for _, e := range evs {
		if e.kind == "start" {
			t := &tenure{token: e.token, start: e, pids: map[int]string{e.pid: "child"}, pidLast: map[int]int64{}, waited: -1}
			by[e.token] = t // a repeated token is a new tenure; checkTokens reports it
			order = append(order, t)
		}
		t := by[e.token]
		if t == nil {
			continue // an event before any start of its token: cannot happen
		}
		switch e.kind {
		case "gstart":
			t.pids[e.pid] = "grandchild"
		case "overlap-end":
			t.waited = e.int("waited")
		}
		t.lastSeen = max(t.lastSeen, e.at)
		t.pidLast[e.pid] = max(t.pidLast[e.pid], e.at)
	}
	return order
}

// checkTokens: tokens strictly increase in start (append) order.
func (res *result) checkTokens() {
	for i := 1; i < len(res.tenures); i++ {
		a, b := res.tenures[i-1], res.tenures[i]
		if b.token <= a.token {
			res.violations = append(res.violations, fmt.Sprintf("token order: child %d started with token %d after child %d with token %d",
				b.start.pid, b.token, a.start.pid, a.token))
		}
	}
}

// checkOverlaps finds every pair of tenures whose processes ran at once:
// the child found the tenure lock held (the kernel's word), or an earlier
// tenure logged an event after the child started (the log's word).
func (res *result) checkOverlaps(byToken map[int64]*round, tm timing) {
	for i, t := range res.tenures {
		prev := map[int64]string{} // token → culprit role
		// The log's word: which earlier process logged after t started.
		for _, p := range res.tenures[:i] {
			for pid, last := range p.pidLast {
				if last > t.start.at {
					prev[p.token] = p.pids[pid]
				}
			}
		}
		// The kernel's word. /proc/locks names the process that took the
		// lock, even when only a descendant that inherited it still runs.
		if t.start.kv["excl"] == "0" {
			for _, h := range strings.Split(t.start.kv["lockholders"], ",") {
				pid, _ := strconv.Atoi(h)
				for _, p := range res.tenures[:i] {
					if _, seen := prev[p.token]; !seen && pid != 0 && p.pids[pid] != "" {
						prev[p.token] = p.pids[pid]
					}
				}
			}
		}
		if t.start.kv["excl"] == "0" && len(prev) == 0 && i > 0 {
			prev[res.tenures[i-1].token] = "unidentified lock holder"
		}
		tokens := make([]int64, 0, len(prev))
		for tok := range prev {
			tokens = append(tokens, tok)
		}
		slices.Sort(tokens)
		for _, tok := range tokens {
			o := overlap{prev: tok, next: t.token, culprit: prev[tok], dur: -1}
			if t.waited >= 0 {
				o.dur = time.Duration(t.waited)
			}
			res.classify(&o, byToken[tok], tenureOf(res.tenures[:i], tok), tm)
			res.overlaps = append(res.overlaps, o)
		}
	}
}

// tenureOf finds token's tenure among ts.
func tenureOf(ts []*tenure, token int64) *tenure {
	for _, t := range ts {
		if t.token == token {
			return t
		}
	}
	return nil
}

// classify decides whether an overlap is the one the design permits (the
// old supervisor was frozen past its deadline, and stopped the child
// promptly once thawed), a known defect, or a violation. prev is the old
// tenure.
func (res *result) classify(o *overlap, rd *round, prev *tenure, tm timing) {
	role := o.culprit
	if role != "child" && role != "grandchild" {
		role = "child"
	}
	switch {
	case rd != nil && rd.kind == faultStop:
		o.class = "frozen"
		// The thawed supervisor stops the child first: TERM, K, KILL. The
		// overlap ended when the next child got the lock (when it did) and
		// the old tenure's processes were last heard of by then anyway.
		end := time.Time{}
		if rd.gotNext && o.dur >= 0 {
			end = rd.next.time().Add(o.dur)
		}
		if prev != nil && prev.lastSeen > 0 {
			if last := time.Unix(0, prev.lastSeen); last.After(end) {
				end = last
			}
		}
		switch late := end.Sub(rd.healAt); {
		case end.IsZero():
			o.class = ""
			res.violations = append(res.violations, fmt.Sprintf(
				"round %d (%s/%s): token %d's %s overlapped the next tenure, and nothing bounds for how long",
				rd.n, rd.kind, rd.variant, o.prev, o.culprit))
		case late > tm.grace+time.Second:
			o.class = ""
			res.violations = append(res.violations, fmt.Sprintf(
				"round %d (%s/%s): token %d's %s ran %v after SIGCONT, more than --kill-grace %v + 1s",
				rd.n, rd.kind, rd.variant, o.prev, o.culprit, late.Round(time.Millisecond), tm.grace))
		}
		return
	case knownDefectOf(rd, role) != "":
		o.class = knownDefectOf(rd, role)
		res.addKnown(o.class, rd)
		return
	}
	what := "no fault"
	if rd != nil {
		what = fmt.Sprintf("round %d (%s/%s)", rd.n, rd.kind, rd.variant)
	}
	res.violations = append(res.violations, fmt.Sprintf("overlap after %s: token %d's %s still ran when token %d's child started (waited %v)",
		what, o.prev, o.culprit, o.next, o.dur))
}

// startedIndex answers "the highest token whose child had started before
// time t".
type startedIndex struct {
	at     []int64
	maxTok []int64
}

func newStartedIndex(ts []*tenure) startedIndex {
	starts := make([]event, 0, len(ts))
	for _, t := range ts {
		starts = append(starts, t.start)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].at < starts[j].at })
	var idx startedIndex
	var m int64
	for _, s := range starts {
		m = max(m, s.token)
		idx.at = append(idx.at, s.at)
		idx.maxTok = append(idx.maxTok, m)
	}
	return idx
}

func (idx startedIndex) highestBefore(t int64) int64 {
	i := sort.Search(len(idx.at), func(i int) bool { return idx.at[i] >= t })
	if i == 0 {
		return 0
	}
	return idx.maxTok[i-1]
}

// checkWrites counts fenced writes by stale tokens (lower than the highest
// token whose child had started before the write began): accepted ones are
// violations, in the children's log and in the table itself. Committed
// tokens must also never decrease in insertion order.
func (res *result) checkWrites(evs []event, dbw []dbWrite, byToken map[int64]*round) {
	idx := newStartedIndex(res.tenures)
	for _, e := range evs {
		if e.kind != "write" {
			continue
		}
		hi := idx.highestBefore(e.at)
		if hi <= e.token {
			continue
		}
		switch e.kv["result"] {
		case "ok":
			res.staleAccepted[e.token]++
			res.violations = append(res.violations, fmt.Sprintf("stale write accepted: %s %d with token %d began at %d, after token %d's child started",
				e.kv["role"], e.pid, e.token, e.at, hi))
		case "refused":
			res.staleRefused[e.token]++
		}
	}
	res.dbWrites = len(dbw)
	var hiTok int64
	for _, w := range dbw {
		if w.token < hiTok {
			res.violations = append(res.violations, fmt.Sprintf("chaos_writes id %d: token %d committed after token %d", w.id, w.token, hiTok))
		}
		hiTok = max(hiTok, w.token)
		if hi := idx.highestBefore(w.at.UnixNano()); hi > w.token {
			res.violations = append(res.violations, fmt.Sprintf("chaos_writes id %d: token %d inserted at %v, after token %d's child started",
				w.id, w.token, w.at.Format(time.RFC3339Nano), hi))
		}
	}
}

// earlyTolerance absorbs the store clock's granularity in the check for
// early takeovers.
const earlyTolerance = 50 * time.Millisecond

// checkRounds: every fault was followed by a new child within TTL + bound,
// and the old tenure's processes ended by their deadline.
func (res *result) checkRounds(tm timing, bound time.Duration) {
	for _, rd := range res.rounds {
		for _, p := range rd.problems {
			res.violations = append(res.violations, fmt.Sprintf("round %d (%s/%s): %s", rd.n, rd.kind, rd.variant, p))
		}
		if rd.skipped != "" {
			continue
		}
		// Until the old tenure's last renewal expires, nobody else may
		// take the name; that renewal was sent at most the renew deadline
		// before the fault, or the old leader would have given up.
		if early := tm.ttl - tm.deadline - earlyTolerance; rd.gotNext && rd.kind != faultTerm && rd.latency < early && !rd.endedBefore {
			res.violations = append(res.violations, fmt.Sprintf("round %d (%s/%s): new child only %v after the fault, before the lease could expire (TTL − renew deadline = %v)",
				rd.n, rd.kind, rd.variant, rd.latency.Round(time.Millisecond), tm.ttl-tm.deadline))
		}
		if rd.gotNext && rd.latency > tm.ttl+bound && rd.storeBlocked {
			res.addKnown("L1", rd)
		} else if rd.gotNext && rd.latency > tm.ttl+bound {
			res.violations = append(res.violations, fmt.Sprintf("round %d (%s/%s): new child %v after the fault, more than TTL %v + %v",
				rd.n, rd.kind, rd.variant, rd.latency.Round(time.Millisecond), tm.ttl, bound))
		}
		for _, p := range rd.orphans {
			if id := knownDefectOf(rd, p.what); id != "" {
				res.addKnown(id, rd)
				continue
			}
			res.violations = append(res.violations, fmt.Sprintf("round %d (%s/%s): token %d's %s %d outlived its tenure's deadline",
				rd.n, rd.kind, rd.variant, p.token, p.what, p.pid))
		}
	}
}

// exitRound is the token of the kill or term round that ended r, or 0
// when stopAll did.
func exitRound(r *replica, byToken map[int64]*round) int64 {
	for tok, rd := range byToken {
		if rd.rep == r && (rd.kind == faultKill || rd.kind == faultTerm) {
			return tok
		}
	}
	return 0
}

// checkExits: every replica the driver ended exited with the documented
// status, and no other replica exited.
func (res *result) checkExits(reps []*replica, byToken map[int64]*round) {
	for _, r := range reps {
		if !r.exited() {
			continue // still running: stopAll reports it
		}
		got := r.status
		switch {
		case r.stopSig == 0:
			res.violations = append(res.violations, fmt.Sprintf("replica %s exited on its own: %s", r.identity, got))
		case !slices.Contains(r.want, got):
			res.violations = append(res.violations, fmt.Sprintf("replica %s (%s, sent %v) exited %q, want %q",
				r.identity, r.wantWhy, r.stopSig, got, r.want))
			res.badExits[exitRound(r, byToken)]++
		}
		if r.exitNote != "" {
			res.violations = append(res.violations, fmt.Sprintf("replica %s: %s", r.identity, r.exitNote))
		}
	}
}
