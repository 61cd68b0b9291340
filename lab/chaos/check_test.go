package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// tkey names one tenure: a token of a partition ("" for the one name).
// Tokens of different partitions may be equal.
type tkey struct {
	part  string
	token int64
}

// tenure is what the event log says about one token's processes.
type tenure struct {
	part     string
	token    int64
	start    event
	pids     map[int]string // pid → "child" or "grandchild"
	pidLast  map[int]int64  // pid → its latest event
	lastSeen int64          // the latest event of any of its processes
	waited   int64          // overlap-end: how long the child waited for the lock; -1 if it never got it
}

func (t *tenure) key() tkey { return tkey{t.part, t.token} }

// childLast is the child's latest event (not its grandchild's).
func (t *tenure) childLast() int64 { return t.pidLast[t.start.pid] }

// overlap is two tenures of one partition whose processes ran at once.
type overlap struct {
	part       string
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
	summary: "with --pid-namespace=false (the default of this suite; not with -chaos.pid-namespace) and where commands get no cgroup " +
		"of their own (not root, no delegation): a grandchild that escaped the child's process group (setsid) survives SIGKILL of " +
		"leaderrun, as Pdeathsig reaches only the child (documented; with the PID namespace, or cgroups, it is a violation)",
	matches: func(rd *round, role string) bool {
		// The escaped grandchild holds the child's lock (inherited), which
		// /proc/locks names by the child that took it.
		return !*flagNS && !commandCgroups && rd.kind == faultKill && rd.variant == armEscape
	},
}, {
	id: "S1",
	summary: "(not leaderrun's; liveness only) the store failed replicas that no fault had cut off — a server too slow under the " +
		"machine's load — and a name or partition went without a child for longer than the bound; design §1 promises no " +
		"liveness while the store is unavailable",
}, {
	id: "L1",
	summary: "(limitation, liveness only) SQLite: a replica frozen while it holds the database's write lock " +
		"blocks every other replica until it is thawed; a name (partitioned: any partition) may have no child until then",
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

// input is everything a finished run left for the checker.
type input struct {
	events    []event
	rounds    []*round
	replicas  []*replica
	writes    []dbWrite // committed fenced writes, in id order
	fenced    bool      // the children made fenced writes (else beats)
	timing    timing
	bound     time.Duration // slack over TTL (+ reconcile interval) for a new child
	survivors []string      // processes alive after the run
	// partitions is the replicas' --partitions; 0 for one name.
	partitions int
	// end is when the driver began stopping the replicas (ns); 0: no gap
	// is checked at the end.
	end int64
	// unasked are commands that ended without being stopped (replicas'
	// "command exited" lines).
	unasked []string
	// unreleased are the tenures whose release failed, with the replica
	// that held them; on etcd (D3) such a partition stays held while that
	// replica lives.
	unreleased map[tkey]*replica
	store      string
	// storeErrors are the store errors the replicas logged: a store that
	// failed replicas no fault had cut off was itself unavailable (S1).
	storeErrors []storeError
}

// result is the checker's verdict on one run.
type result struct {
	rounds     []*round
	tenures    []*tenure // by partition, each in start order
	overlaps   []overlap
	violations []string
	known      map[string]map[int]bool // known defect id → the faults (round numbers) it occurred in
	knownIn    map[*round]bool         // the rounds (tenures hit) a known defect occurred in

	// per tenure, for the table
	staleAccepted  map[tkey]int
	staleRefused   map[tkey]int
	badExits       map[int]int // by the fault that ended the replica; 0: the final stop
	unplanned      int
	dbWrites       int
	fenced         bool
	partitions     int
	longestGap     time.Duration
	longestGapWhat string
}

// where prefixes a partition's messages.
func where(part string) string {
	if part == "" {
		return ""
	}
	return "partition " + part + ": "
}

// check runs every check over a finished run: per partition (or for the
// one name) tokens, overlaps, fenced writes and gaps; per round the new
// child's timing and orphans; per replica its exit.
func check(in input) *result {
	res := &result{rounds: in.rounds, known: map[string]map[int]bool{}, knownIn: map[*round]bool{}, fenced: in.fenced, partitions: in.partitions,
		staleAccepted: map[tkey]int{}, staleRefused: map[tkey]int{}, badExits: map[int]int{}}
	evs := map[string][]event{}
	for _, e := range in.events {
		evs[e.part] = append(evs[e.part], e)
	}
	writes := map[string][]dbWrite{}
	for _, w := range in.writes {
		writes[w.part] = append(writes[w.part], w)
	}
	rounds := map[string]map[int64]*round{}
	for _, rd := range in.rounds {
		if rd.skipped == "" {
			if rounds[rd.part] == nil {
				rounds[rd.part] = map[int64]*round{}
			}
			rounds[rd.part][rd.token] = rd
		}
	}
	parts := res.checkParts(evs, writes, in.partitions)
	for _, part := range parts {
		res.checkPartition(part, evs[part], rounds[part], writes[part], in)
	}
	res.checkRounds(in.timing, in.bound, in.storeErrors)
	res.checkExits(in.replicas, in.rounds)
	for _, s := range in.survivors {
		res.violations = append(res.violations, "survived the run: "+s)
	}
	for _, u := range in.unasked {
		res.violations = append(res.violations, u)
	}
	next := map[tkey]bool{}
	for _, rd := range in.rounds {
		if rd.gotNext {
			next[tkey{rd.part, rd.next.token}] = true
		}
	}
	first := map[string]bool{}
	for _, t := range res.tenures {
		if first[t.part] && !next[t.key()] {
			res.unplanned++
		}
		first[t.part] = true
	}
	return res
}

// checkParts checks that every event names a partition of the run (none
// for one name) and every partition had a child, and returns the
// partitions to check, in order.
func (res *result) checkParts(evs map[string][]event, writes map[string][]dbWrite, partitions int) []string {
	var parts []string
	for part := range evs {
		parts = append(parts, part)
	}
	for part := range writes {
		if evs[part] == nil {
			parts = append(parts, part)
		}
	}
	slices.SortFunc(parts, func(a, b string) int {
		x, errX := strconv.Atoi(a)
		y, errY := strconv.Atoi(b)
		if errX != nil || errY != nil {
			return strings.Compare(a, b)
		}
		return x - y
	})
	for _, part := range parts {
		p, err := strconv.Atoi(part)
		switch {
		case partitions == 0 && part != "":
			res.violations = append(res.violations, fmt.Sprintf("events or writes of partition %q in a run of one name", part))
		case partitions > 0 && part == "":
			res.violations = append(res.violations, "events or writes without a partition in a partitioned run")
		case partitions > 0 && (err != nil || p < 0 || p >= partitions || strconv.Itoa(p) != part):
			res.violations = append(res.violations, fmt.Sprintf("events or writes of partition %q, not one of 0 … %d", part, partitions-1))
		}
	}
	for p := range partitions {
		if !slices.ContainsFunc(evs[strconv.Itoa(p)], func(e event) bool { return e.kind == "start" }) {
			res.violations = append(res.violations, fmt.Sprintf("partition %d never had a child", p))
		}
	}
	for _, part := range parts {
		for _, e := range evs[part] {
			if e.kind == "start" && partitions > 0 && e.kv["partitions"] != strconv.Itoa(partitions) {
				res.violations = append(res.violations, fmt.Sprintf("partition %s: child %d started with LEADERRUN_PARTITIONS=%q, want %d",
					part, e.pid, e.kv["partitions"], partitions))
			}
		}
	}
	if partitions == 0 && !slices.ContainsFunc(evs[""], func(e event) bool { return e.kind == "start" }) && len(evs[""]) > 0 {
		res.violations = append(res.violations, "the name never had a child")
	}
	return parts
}

// checkPartition runs the checks of one partition's (or the one name's)
// tenures: every guarantee holds per partition.
func (res *result) checkPartition(part string, evs []event, byToken map[int64]*round, dbw []dbWrite, in input) {
	ts := tenures(part, evs)
	res.tenures = append(res.tenures, ts...)
	res.checkTokens(ts)
	res.checkOverlaps(ts, byToken, in.timing)
	res.checkWrites(part, evs, ts, dbw)
	res.checkGaps(part, ts, in)
}

func (res *result) addKnown(id string, rd *round) {
	if res.known[id] == nil {
		res.known[id] = map[int]bool{}
	}
	res.known[id][rd.n] = true
	res.knownIn[rd] = true
}

// tenures groups one partition's events by token, in start order.
func tenures(part string, evs []event) []*tenure {
	by := map[int64]*tenure{}
	var order []*tenure
	for _, e := range evs {
		if e.kind == "start" {
			t := &tenure{part: part, token: e.token, start: e, pids: map[int]string{e.pid: "child"}, pidLast: map[int]int64{}, waited: -1}
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

// checkTokens: a partition's tokens strictly increase in start (append)
// order.
func (res *result) checkTokens(ts []*tenure) {
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if b.token <= a.token {
			res.violations = append(res.violations, fmt.Sprintf("%stoken order: child %d started with token %d after child %d with token %d",
				where(b.part), b.start.pid, b.token, a.start.pid, a.token))
		}
	}
}

// checkOverlaps finds every pair of a partition's tenures whose processes
// ran at once: the child found its partition's tenure lock held (the
// kernel's word), or an earlier tenure logged an event after the child
// started (the log's word).
func (res *result) checkOverlaps(ts []*tenure, byToken map[int64]*round, tm timing) {
	for i, t := range ts {
		prev := map[int64]string{} // token → culprit role
		// The log's word: which earlier process logged after t started.
		for _, p := range ts[:i] {
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
				for _, p := range ts[:i] {
					if _, seen := prev[p.token]; !seen && pid != 0 && p.pids[pid] != "" {
						prev[p.token] = p.pids[pid]
					}
				}
			}
		}
		if t.start.kv["excl"] == "0" && len(prev) == 0 && i > 0 {
			prev[ts[i-1].token] = "unidentified lock holder"
		}
		tokens := make([]int64, 0, len(prev))
		for tok := range prev {
			tokens = append(tokens, tok)
		}
		slices.Sort(tokens)
		for _, tok := range tokens {
			o := overlap{part: t.part, prev: tok, next: t.token, culprit: prev[tok], dur: -1}
			if t.waited >= 0 {
				o.dur = time.Duration(t.waited)
			}
			prevT := tenureOf(ts[:i], tok)
			rd := byToken[tok]
			if rd == nil {
				rd = res.frozenHolder(prevT, t.start.time())
			}
			res.classify(&o, rd, prevT, tm)
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

// frozenHolder returns the SIGSTOP round that froze the supervisor of
// tenure prev while the next tenure started at next, when no round names
// prev itself: a partition the replica acquired in the instant between
// the driver's listing of what it held and the SIGSTOP (seen on MySQL,
// with 8 partitions). Its overlap is then the frozen-supervisor case, with
// the same bounds. The child's own start may come after the SIGSTOP (its
// supervisor forked it just before; seen on Kubernetes, 14 ms after the
// partition the round names): a frozen supervisor forks nothing, so a
// child of its that started before the thaw was forked before the freeze.
func (res *result) frozenHolder(prev *tenure, next time.Time) *round {
	if prev == nil {
		return nil
	}
	holder := prev.start.kv["holder"]
	started := prev.start.time()
	for _, rd := range res.rounds {
		beforeThaw := rd.healAt.IsZero() || started.Before(rd.healAt)
		if rd.skipped == "" && rd.kind == faultStop && rd.rep != nil && rd.rep.identity == holder &&
			rd.part != "" && beforeThaw && next.After(rd.at) && (rd.healAt.IsZero() || !next.After(rd.healAt)) {
			return rd
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
				"%sround %d (%s/%s): token %d's %s overlapped the next tenure, and nothing bounds for how long",
				where(o.part), rd.n, rd.kind, rd.variant, o.prev, o.culprit))
		case late > tm.grace+time.Second:
			o.class = ""
			res.violations = append(res.violations, fmt.Sprintf(
				"%sround %d (%s/%s): token %d's %s ran %v after SIGCONT, more than --kill-grace %v + 1s",
				where(o.part), rd.n, rd.kind, rd.variant, o.prev, o.culprit, late.Round(time.Millisecond), tm.grace))
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
	res.violations = append(res.violations, fmt.Sprintf("%soverlap after %s: token %d's %s still ran when token %d's child started (waited %v)",
		where(o.part), what, o.prev, o.culprit, o.next, o.dur))
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

// checkWrites counts one partition's fenced writes by stale tokens (lower
// than the highest token of the partition whose child had started before
// the write began): accepted ones are violations, in the children's log
// and in the table itself. Committed tokens must also never decrease in
// insertion order.
func (res *result) checkWrites(part string, evs []event, ts []*tenure, dbw []dbWrite) {
	idx := newStartedIndex(ts)
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
			res.staleAccepted[tkey{part, e.token}]++
			res.violations = append(res.violations, fmt.Sprintf("%sstale write accepted: %s %d with token %d began at %d, after token %d's child started",
				where(part), e.kv["role"], e.pid, e.token, e.at, hi))
		case "refused":
			res.staleRefused[tkey{part, e.token}]++
		}
	}
	res.dbWrites += len(dbw)
	var hiTok int64
	for _, w := range dbw {
		if w.token < hiTok {
			res.violations = append(res.violations, fmt.Sprintf("%schaos_writes id %d: token %d committed after token %d", where(part), w.id, w.token, hiTok))
		}
		hiTok = max(hiTok, w.token)
		if hi := idx.highestBefore(w.at.UnixNano()); hi > w.token {
			res.violations = append(res.violations, fmt.Sprintf("%schaos_writes id %d: token %d inserted at %v, after token %d's child started",
				where(part), w.id, w.token, w.at.Format(time.RFC3339Nano), hi))
		}
	}
}

// gapLimit is the longest a name or partition may go without a child:
// a lease left behind expires within the TTL, the others notice within
// the reconcile interval (partitioned), plus the bound.
func gapLimit(tm timing, bound time.Duration) time.Duration {
	return tm.ttl + tm.reconcile + bound
}

// checkGaps: from its first child until the driver began stopping the
// replicas, a partition (or the one name) never went longer than gapLimit
// without a child — measured from the old child's last event to the next
// child's start, whatever the reason, fault or not. A gap during a freeze
// that blocked the SQLite store is the known limitation L1.
func (res *result) checkGaps(part string, ts []*tenure, in input) {
	limit := gapLimit(in.timing, in.bound)
	gap := func(a *tenure, from, to int64, what string) {
		d := time.Duration(to - from)
		if d > res.longestGap {
			res.longestGap, res.longestGapWhat = d, where(part)+what
		}
		if d <= limit {
			return
		}
		for _, rd := range res.rounds {
			if rd.blockedStore && from >= rd.at.UnixNano()-int64(tick) && from <= rd.healAt.UnixNano() &&
				to <= rd.healAt.Add(limit).UnixNano() {
				res.addKnown("L1", rd)
				return
			}
		}
		for _, rd := range res.rounds {
			// During an outage (etcd without a leader, say) the store is
			// unavailable: the bound starts once it heals.
			if o, ok := outages[rd.kind]; ok && from >= rd.at.UnixNano()-int64(tick) &&
				from <= rd.healAt.Add(in.timing.deadline+in.timing.grace).UnixNano() &&
				to <= rd.healAt.Add(limit+o.extension).UnixNano() {
				return
			}
		}
		if stalled(in.storeErrors, from, to, a.holder(in.replicas)) {
			res.addKnown("S1", res.roundOf(part, a.token))
			return
		}
		res.violations = append(res.violations, fmt.Sprintf("%sno child for %v (%s), more than TTL %v + reconcile interval %v + %v",
			where(part), d.Round(time.Millisecond), what, in.timing.ttl, in.timing.reconcile, in.bound))
	}
	ended := func(t *tenure) {
		if last := t.childLast(); last < in.end {
			gap(t, last, in.end, fmt.Sprintf("token %d's child last heard of, then the run ended", t.token))
		}
	}
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if in.end > 0 && b.start.at > in.end {
			ended(a)
			return
		}
		gap(a, a.childLast(), b.start.at, fmt.Sprintf("token %d's child last heard of, then token %d's child started", a.token, b.token))
	}
	if n := len(ts); n > 0 && in.end > 0 && ts[n-1].start.at <= in.end {
		ended(ts[n-1])
	}
}

// holder returns the replica generation that ran t, or nil.
func (t *tenure) holder(reps []*replica) *replica {
	for _, r := range reps {
		if r.identity == t.start.kv["holder"] {
			return r
		}
	}
	return nil
}

// stalled reports whether a replica other than except logged a store
// error between from and to (ns): the store itself was unavailable then,
// not only to a replica a fault had cut off.
func stalled(errs []storeError, from, to int64, except *replica) bool {
	for _, e := range errs {
		if at := e.at.UnixNano(); e.rep != except && at >= from && at <= to {
			return true
		}
	}
	return false
}

// roundOf returns the last round that hit tenure token of partition part,
// or a round numbered 0 (no fault) when none did.
func (res *result) roundOf(part string, token int64) *round {
	var last *round
	for _, rd := range res.rounds {
		if rd.skipped == "" && rd.part == part && rd.token == token {
			last = rd
		}
	}
	if last == nil {
		return &round{part: part, token: token}
	}
	return last
}

// earlyTolerance absorbs the store clock's granularity in the check for
// early takeovers.
const earlyTolerance = 50 * time.Millisecond

// checkRounds: every fault was followed by a new child within TTL (+
// reconcile interval) + bound, no sooner than the old lease could expire,
// and the old tenure's processes ended by their deadline.
func (res *result) checkRounds(tm timing, bound time.Duration, storeErrs []storeError) {
	for _, rd := range res.rounds {
		what := fmt.Sprintf("%sround %d (%s/%s)", where(rd.part), rd.n, rd.kind, rd.variant)
		for _, p := range rd.problems {
			res.violations = append(res.violations, fmt.Sprintf("%s: %s", what, p))
		}
		if rd.d3 != "" {
			// Once known defect D3 (etcd), fixed by 05925e4.
			res.violations = append(res.violations, fmt.Sprintf("%s: %s", what, rd.d3))
		}
		if rd.skipped != "" {
			continue
		}
		// Until the old tenure's last renewal expires, nobody else may
		// take the name; that renewal was sent at most the renew deadline
		// before the fault, or the old leader would have given up. (After
		// SIGTERM it releases; after a transient fault it may have lost
		// the tenure and released.)
		// Except after SIGKILL of a leader, one-name or partitioned:
		// replicas share this host, and the same-host fast path (package
		// samehost; per partition, elect.Owner) takes the name or the
		// partition over at once once the dead holder's tree is gone; that
		// it was gone is the overlap check's to prove (the lock, the pids).
		// A frozen leader (SIGSTOP) is alive: no early takeover then.
		// Nor after any fault whose tenure ended with the leader's end
		// signal (its child's tree gone at its renew deadline, say): its
		// successor may seize at once, as the overlap check judges.
		fast := rd.kind == faultKill || rd.endSignalled
		if early := tm.ttl - tm.deadline - earlyTolerance; rd.gotNext && rd.kind != faultTerm && !fast && !transient(rd.kind) && rd.latency < early && !rd.endedBefore {
			res.violations = append(res.violations, fmt.Sprintf("%s: new child only %v after the fault, before the lease could expire (TTL − renew deadline = %v)",
				what, rd.latency.Round(time.Millisecond), tm.ttl-tm.deadline))
		}
		latency, late := newChildBound(rd, tm, bound)
		since, extra := "the fault", ""
		if o, ok := outages[rd.kind]; ok {
			since = o.healed
			if o.extension > 0 {
				extra = fmt.Sprintf(" + the store's lease extension %v", o.extension)
			}
		}
		switch {
		case !rd.gotNext || latency <= late:
		case rd.storeBlocked:
			res.addKnown("L1", rd)
		case !isOutage(rd.kind) && stalled(storeErrs, rd.at.UnixNano(), rd.next.at, rd.rep):
			res.addKnown("S1", rd)
		default:
			res.violations = append(res.violations, fmt.Sprintf("%s: new child %v after %s, more than TTL %v + reconcile interval %v + %v%s",
				what, latency.Round(time.Millisecond), since, tm.ttl, tm.reconcile, bound, extra))
		}
		for _, p := range rd.orphans {
			if id := knownDefectOf(rd, p.what); id != "" {
				res.addKnown(id, rd)
				continue
			}
			res.violations = append(res.violations, fmt.Sprintf("%s: token %d's %s %d outlived its tenure's deadline",
				what, p.token, p.what, p.pid))
		}
	}
}

// newChildBound returns how long after the fault the next child of rd's
// partition started, and how long it may take: the TTL, plus the reconcile
// interval, plus the bound. After an outage the time counts from its heal
// (etcd's new leader's election), and the store's lease extension is
// added (etcd's new leader renews every lease by its election timeout).
func newChildBound(rd *round, tm timing, bound time.Duration) (latency, limit time.Duration) {
	latency, limit = rd.latency, tm.ttl+tm.reconcile+bound
	if o, ok := outages[rd.kind]; ok {
		latency, limit = rd.next.time().Sub(rd.healAt), limit+o.extension
	}
	return latency, limit
}

// exitRound is the number of the kill or term fault that ended r, or 0
// when stopAll did.
func exitRound(r *replica, rounds []*round) int {
	for _, rd := range rounds {
		if rd.skipped == "" && rd.rep == r && (rd.kind == faultKill || rd.kind == faultTerm) {
			return rd.n
		}
	}
	return 0
}

// checkExits: every replica the driver ended exited with the documented
// status, and no other replica exited.
func (res *result) checkExits(reps []*replica, rounds []*round) {
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
			res.badExits[exitRound(r, rounds)]++
		}
		if r.exitNote != "" {
			res.violations = append(res.violations, fmt.Sprintf("replica %s: %s", r.identity, r.exitNote))
		}
	}
}
