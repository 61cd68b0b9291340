package leasetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The operations of the model-based test: how sequences are drawn, and
// how one operation runs on the store and on the model.

type opKind int

const (
	opAcquire opKind = iota
	opSeize
	opRenew
	opAnnotate
	opRelease
	opStepDown
	opGet
	opList
	opJoin
	opRenewMember
	opLeave
	opGetGroup
	opStep     // let d pass
	opDeadline // go to the k-th deadline ahead, and d beyond (−1 ms, 0, +1 ms)
	opPlant    // plant an expired or released record with a token far ahead of the clock
	opCampaign // lease.Campaigner's, from here on
	opWithdraw
	opCandidates
	opForget
)

var opNames = [...]string{"acquire", "seize", "renew", "annotate", "release", "step-down", "get", "list",
	"join", "renew-member", "leave", "get-group", "step", "deadline", "plant",
	"campaign", "withdraw", "candidates", "forget"}

// modelPartitions is the number of partitions of a sequence's group.
const modelPartitions = 3

var holders = [...]string{"a", "b", "c"}

// whoHolder is op.who for the holder of the target's last tenure.
const whoHolder = 5

// lastGranted is op.target for the name or partition granted last.
const lastGranted = -1

// op is one operation of a sequence, drawn before it runs: its tokens and
// records are named by their place in the sequence's history (the
// holder's last tenure, the one before the current), so that a sequence
// with operations dropped still means something.
type op struct {
	kind   opKind
	target int           // 0: the name; 1 … modelPartitions: partition target−1; lastGranted
	who    int           // the holder or member: 0 … 2, or whoHolder; a step-down's successor: also 3 (none) or 4 (a stranger)
	tok    int           // 0: the holder's own last tenure's; 1: the current tenure's; 2: the tenure before; 3: the current + 1
	ttl    time.Duration // the lease's or membership's duration, or the step-down window
	d      time.Duration // a clock step
	k      int           // claims (a bit per partition), the deadline's index, a join's partitions, a plant's released bit
	where  string
	cand   lease.Candidacy // a campaign's
}

// opWeight is how often a sequence draws an operation of a kind.
type opWeight struct {
	kind opKind
	w    int
}

// generate draws the sequence of seed, with plants when the store can
// plant records.
func (r *modelRun) generate(seed uint64, plants bool) []op {
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(ds []time.Duration) time.Duration { return ds[rnd.IntN(len(ds))] }
	weights := []opWeight{
		{opAcquire, 16}, {opSeize, 4}, {opRenew, 10}, {opAnnotate, 3}, {opRelease, 8}, {opStepDown, 7},
		{opGet, 4}, {opList, 2}, {opJoin, 6}, {opRenewMember, 7}, {opLeave, 2}, {opGetGroup, 3},
		{opStep, 12}, {opDeadline, 9},
	}
	weights = append(weights, campaignWeights...)
	if plants {
		weights = append(weights, opWeight{opPlant, 2})
	}
	total := 0
	for _, w := range weights {
		total += w.w
	}
	seq := make([]op, 0, r.h.Length+4)
	for range r.h.Length {
		n := rnd.IntN(total)
		var o op
		for _, w := range weights {
			if n < w.w {
				o.kind = w.kind
				break
			}
			n -= w.w
		}
		if rnd.IntN(2) == 1 {
			o.target = 1 + rnd.IntN(modelPartitions)
		}
		o.who = rnd.IntN(len(holders))
		switch x := rnd.IntN(20); {
		case x < 13:
			o.tok = 0
		case x < 16:
			o.tok = 1
		case x < 18:
			o.tok = 2
		default:
			o.tok = 3
		}
		o.ttl = pick(r.h.TTLs)
		switch o.kind {
		case opRenew, opAnnotate, opRelease, opSeize, opStepDown:
			if rnd.IntN(2) == 0 {
				o.target = lastGranted
			}
		}
		switch o.kind {
		case opRenew, opAnnotate, opRelease:
			if rnd.IntN(5) < 3 {
				o.who = whoHolder
			}
		case opAcquire:
			if rnd.IntN(8) == 0 {
				o.who = whoHolder
			}
		case opStepDown:
			o.ttl = pick(r.h.Windows)
			if x := rnd.IntN(20); x < 7 {
				o.who = 3
			} else if x < 9 {
				o.who = 4
			}
		case opStep:
			o.d = pick(r.h.Steps)
		case opDeadline:
			o.k = rnd.IntN(6)
			o.d = time.Duration(rnd.IntN(3)-1) * time.Millisecond
		case opJoin:
			o.k = modelPartitions
			if rnd.IntN(12) == 0 {
				o.k++
			}
		case opRenewMember:
			o.k = rnd.IntN(1 << modelPartitions)
		case opPlant:
			o.k = rnd.IntN(2)
		}
		if o.kind == opAnnotate {
			o.where = fmt.Sprintf("w%d", rnd.IntN(10))
		}
		if isCampaign(o.kind) {
			r.drawCampaign(rnd, &o)
		}
		seq = append(seq, o)
		// A name released and forgotten within one millisecond: its
		// token is not yet behind the clock (lease.ErrTokenAhead).
		if o.kind == opRelease && rnd.IntN(3) == 0 {
			seq = append(seq, op{kind: opForget, target: o.target})
		}
	}
	// Every sequence ends by reading back all it wrote.
	return append(seq, op{kind: opGet}, op{kind: opGetGroup}, op{kind: opList}, op{kind: opCandidates})
}

// tenure is a grant of a name, as the store made it.
type tenure struct {
	holder string
	token  int64
}

// runState is one run of a sequence: its names, the model's states, and
// the tenures granted so far.
type runState struct {
	n names
	// states are the states the model may be in: more than one where the
	// store's outcomes so far could not tell worlds apart (see worlds).
	states  []*mstate
	tenures map[string][]tenure
	last    string    // the name or partition granted last
	start   time.Time // the store's clock when the run began
}

// resolved is an op with its names, tokens and records filled in.
type resolved struct {
	op
	name   string // the lease name, or the group
	holder string // or member, or successor
	token  int64
	dead   lease.Record
	claims []lease.Claim
}

func (rs *runState) resolve(o op) resolved {
	x := resolved{op: o, name: rs.n.key(o.target)}
	if o.target == lastGranted {
		x.name = rs.n.name
		if rs.last != "" {
			x.name = rs.last
		}
	}
	switch {
	case o.who < len(holders):
		x.holder = holders[o.who]
	case o.who == 4:
		x.holder = "stranger"
	case o.who == whoHolder:
		x.holder = holders[0]
		if ts := rs.tenures[x.name]; len(ts) > 0 {
			x.holder = ts[len(ts)-1].holder
		}
	}
	x.token = rs.token(x.name, x.holder, o.tok)
	switch o.kind {
	case opSeize:
		x.dead = rs.deadOf(x.name, o.tok)
	case opJoin, opRenewMember, opLeave, opGetGroup:
		x.name = rs.n.group
	}
	if o.kind == opRenewMember {
		for p := range modelPartitions {
			if o.k&(1<<p) != 0 {
				x.claims = append(x.claims, lease.Claim{Partition: p, Token: rs.token(rs.n.key(p+1), x.holder, o.tok)})
			}
		}
	}
	return x
}

// token names a token of name for holder (see op.tok); 1 when there is
// none.
func (rs *runState) token(name, holder string, which int) int64 {
	ts := rs.tenures[name]
	if len(ts) == 0 {
		return 1
	}
	switch which {
	case 0:
		for i := len(ts) - 1; i >= 0; i-- {
			if ts[i].holder == holder {
				return ts[i].token
			}
		}
		return ts[len(ts)-1].token
	case 2:
		if len(ts) > 1 {
			return ts[len(ts)-2].token
		}
	case 3:
		return ts[len(ts)-1].token + 1
	}
	return ts[len(ts)-1].token
}

// deadOf names the tenure a Seize proves dead: the current one, the one
// before, or the current holder under another token.
func (rs *runState) deadOf(name string, which int) lease.Record {
	ts := rs.tenures[name]
	if len(ts) == 0 {
		return lease.Record{Name: name, Holder: "a", Token: 1}
	}
	t := ts[len(ts)-1]
	switch which {
	case 2:
		if len(ts) > 1 {
			t = ts[len(ts)-2]
		}
	case 3:
		t.token++
	}
	return lease.Record{Name: name, Holder: t.holder, Token: t.token}
}

// outcome is what an operation returned, the store's or the model's.
type outcome struct {
	err   string // "" for success, else the kind of error (see outcomeOf)
	rec   *lease.Record
	group *lease.Group
	recs  []lease.Record
	have  int // a *lease.PartitionsError's Have
	// listed marks the outcome of Candidates, cands its list.
	listed bool
	cands  []lease.Standing
}

func outcomeOf(rec *lease.Record, err error) outcome {
	var held *lease.HeldError
	var parts *lease.PartitionsError
	switch {
	case err == nil:
		return outcome{rec: rec}
	case errors.As(err, &held):
		r := held.Record
		return outcome{err: "held", rec: &r}
	case errors.As(err, &parts):
		return outcome{err: "partitions", have: parts.Have}
	}
	for _, e := range []error{lease.ErrLost, lease.ErrNotFound, lease.ErrNotHeld, lease.ErrAlreadyLeader, lease.ErrUnknownSuccessor,
		lease.ErrTokenAhead} {
		if errors.Is(err, e) {
			return outcome{err: e.Error()}
		}
	}
	return outcome{err: "error: " + err.Error()}
}

// exec runs x on the store.
func (rs *runState) exec(ctx context.Context, s lease.Store, x resolved) outcome {
	switch x.kind {
	case opAcquire:
		rec, err := s.Acquire(ctx, x.name, x.holder, x.ttl)
		return outcomeOf(&rec, err)
	case opSeize:
		rec, err := s.Seize(ctx, x.name, x.holder, x.dead, x.ttl)
		return outcomeOf(&rec, err)
	case opRenew:
		rec, err := s.Renew(ctx, x.name, x.holder, x.token, x.ttl)
		return outcomeOf(&rec, err)
	case opAnnotate:
		return outcomeOf(nil, s.Annotate(ctx, x.name, x.holder, x.token, x.where))
	case opRelease:
		return outcomeOf(nil, s.Release(ctx, x.name, x.holder, x.token))
	case opStepDown:
		rec, err := s.RequestStepDown(ctx, x.name, x.holder, x.ttl)
		return outcomeOf(&rec, err)
	case opGet:
		rec, err := s.Get(ctx, x.name)
		return outcomeOf(&rec, err)
	case opList:
		recs, err := s.List(ctx)
		o := outcomeOf(nil, err)
		for _, r := range recs {
			if strings.HasPrefix(r.Name, rs.n.prefix+"-") {
				o.recs = append(o.recs, r)
			}
		}
		return o
	case opJoin:
		g, err := s.Join(ctx, x.name, x.k, x.holder, x.ttl)
		return groupOutcome(g, err)
	case opRenewMember:
		g, err := s.RenewMember(ctx, x.name, x.holder, x.claims, x.ttl)
		return groupOutcome(g, err)
	case opLeave:
		return outcomeOf(nil, s.Leave(ctx, x.name, x.holder))
	case opGetGroup:
		g, err := s.GetGroup(ctx, x.name)
		return groupOutcome(g, err)
	case opCampaign, opWithdraw, opCandidates, opForget:
		return execCampaign(ctx, s, x)
	}
	panic("not a store operation")
}

func groupOutcome(g lease.Group, err error) outcome {
	o := outcomeOf(nil, err)
	if err == nil {
		o.group = &g
	}
	return o
}

// apply runs x on the model's state m, in the world c stands for, by the
// rules of package lease.
func (r *modelRun) apply(rs *runState, m *mstate, x resolved, c *chooser) outcome {
	now := c.now()
	switch x.kind {
	case opAcquire, opSeize:
		var dead *lease.Record
		if x.kind == opSeize {
			dead = &x.dead
		}
		granted, err := lease.Grant(m.view(x.name, c, true), x.name, x.holder, dead, x.ttl, now)
		if err != nil {
			m.see(x.name, x.holder, x.ttl, c, r.h.KeepsFresh)
			return outcomeOf(nil, err)
		}
		if r.h.SeesGranted {
			m.seeGranted(x.name, x.holder, x.ttl, c)
		}
		expires, none := c.expiry(x.ttl), span{}
		m.write(x.name, granted, &expires, &none)
		m.recs[x.name].rounds = ""
		return outcome{rec: &granted}
	case opRenew:
		renewed, err := lease.Renew(m.view(x.name, c, true), x.holder, x.token, x.ttl, now)
		if err != nil {
			return outcomeOf(nil, err)
		}
		expires := c.expiry(x.ttl)
		m.write(x.name, renewed, &expires, nil)
		return outcome{rec: &renewed}
	case opAnnotate:
		annotated, err := lease.Annotate(m.view(x.name, c, true), x.holder, x.token, x.where)
		if err == nil {
			m.write(x.name, annotated, nil, nil)
		}
		return outcomeOf(nil, err)
	case opRelease:
		released, err := lease.Release(m.view(x.name, c, true), x.holder, x.token)
		if err == nil {
			m.write(x.name, released, nil, nil)
		}
		return outcomeOf(nil, err)
	case opStepDown:
		asked, err := lease.StepDown(m.view(x.name, c, true), x.holder, x.ttl, func() bool {
			return m.liveSuccessor(x.name, x.holder, c)
		})
		if err != nil {
			return outcomeOf(nil, err)
		}
		reserved := c.after(asked.Reserved)
		m.write(x.name, asked, nil, &reserved)
		return outcome{rec: &asked}
	case opGet:
		rec := m.view(x.name, c, false)
		if !rec.Exists() {
			return outcomeOf(nil, lease.ErrNotFound)
		}
		return outcome{rec: &rec}
	case opList:
		return outcome{recs: m.list(rs.n.prefix+"-", c)}
	case opJoin:
		g := m.groups[x.name]
		have := 0
		if g != nil {
			have = g.partitions
		}
		n, err := lease.JoinPartitions(x.name, have, x.k)
		if err != nil {
			return outcomeOf(nil, err)
		}
		if g == nil {
			g = &mgroup{members: map[string]span{}}
			m.groups[x.name] = g
		}
		g.partitions = n
		r.keepMember(g, x.holder, x.ttl, c)
		view := m.group(x.name, c)
		return outcome{group: &view}
	case opRenewMember:
		g := m.groups[x.name]
		if g == nil {
			return outcomeOf(nil, lease.ErrNotFound)
		}
		r.keepMember(g, x.holder, x.ttl, c)
		claimed := map[string]bool{}
		for _, claim := range x.claims {
			key := lease.PartitionKey(x.name, claim.Partition)
			claimed[key] = true
			if renewed, err := lease.Renew(m.view(key, c, true), x.holder, claim.Token, x.ttl, now); err == nil {
				expires := c.expiry(x.ttl)
				m.write(key, renewed, &expires, nil)
				if r.h.ReleasesUnclaimed {
					m.recs[key].rounds = x.holder
				}
			}
		}
		view := m.group(x.name, c)
		if r.h.ReleasesUnclaimed {
			r.releaseUnclaimed(m, x.name, x.holder, claimed, c)
		}
		return outcome{group: &view}
	case opLeave:
		if g := m.groups[x.name]; g != nil {
			delete(g.members, x.holder)
		}
		return outcome{}
	case opGetGroup:
		if m.groups[x.name] == nil {
			return outcomeOf(nil, lease.ErrNotFound)
		}
		view := m.group(x.name, c)
		return outcome{group: &view}
	case opCampaign, opWithdraw, opCandidates, opForget:
		return applyCampaign(m, x, c)
	}
	panic("not a store operation")
}

// releaseUnclaimed releases, for a store that ReleasesUnclaimed, the
// partitions of group that member's rounds claimed before, that it holds
// and that this round did not claim.
func (r *modelRun) releaseUnclaimed(m *mstate, group, member string, claimed map[string]bool, c *chooser) {
	for p := range m.groups[group].partitions {
		key := lease.PartitionKey(group, p)
		rec := m.recs[key]
		if rec == nil || claimed[key] || rec.rounds != member {
			continue
		}
		if released, err := lease.Release(m.view(key, c, true), member, rec.rec.Token); err == nil {
			m.write(key, released, nil, nil)
		}
	}
}

// keepMember makes member a member of g (lease.KeepMember).
func (r *modelRun) keepMember(g *mgroup, member string, ttl time.Duration, c *chooser) {
	until, _ := lease.KeepMember(time.Time{}, ttl, c.now())
	g.members[member] = span{until, until}
}

// world is one way the rules may have gone: the outcome at the earliest
// and at the latest instants, and the state it leaves.
type world struct {
	early, late outcome
	state       *mstate
}

// maxWorlds bounds the worlds one operation is judged against from one
// state, and maxStates the states the model keeps.
const (
	maxWorlds = 64
	maxStates = 16
)

// worlds runs x on the model's state m in every world its window w leaves
// open.
func (r *modelRun) worlds(rs *runState, m *mstate, x resolved, w span) []world {
	var out []world
	stack := [][]bool{nil}
	for len(stack) > 0 && len(out) < maxWorlds {
		forced := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ec := &chooser{w: w, lag: r.h.Late, forced: forced}
		es := m.clone()
		early := r.apply(rs, es, x, ec)
		lc := &chooser{w: w, lag: r.h.Late, late: true, forced: ec.asked}
		ls := m.clone()
		late := r.apply(rs, ls, x, lc)
		out = append(out, world{early: early, late: late, state: merge(es, ls)})
		for i := len(forced); i < len(ec.asked); i++ {
			stack = append(stack, append(slices.Clone(ec.asked[:i]), true))
		}
	}
	return out
}

// step runs one operation of a sequence on the store and the model, and
// returns its line of the trace and, if they disagree, why.
func (r *modelRun) step(ctx context.Context, s ModelStore, rs *runState, o op) (string, string) {
	clock := s.Clock
	switch o.kind {
	case opStep:
		clock.Advance(ctx, o.d)
		return r.clockLine(ctx, s, rs, fmt.Sprintf("step %v", o.d))
	case opDeadline:
		now, err := clock.Now(ctx)
		if err != nil {
			return "deadline", "read the store's clock: " + err.Error()
		}
		ds := rs.states[0].deadlines(now, r.horizon())
		if len(ds) == 0 {
			return "deadline: none ahead", ""
		}
		to := ds[o.k%len(ds)].Add(o.d)
		if to.After(now) {
			clock.Advance(ctx, to.Sub(now))
		}
		return r.clockLine(ctx, s, rs, fmt.Sprintf("to deadline %v %+v", r.rel(rs, ds[o.k%len(ds)]), o.d))
	case opPlant:
		now, err := clock.Now(ctx)
		if err != nil {
			return "plant", "read the store's clock: " + err.Error()
		}
		name := rs.n.key(o.target)
		rec := lease.Record{Name: name, Holder: "planted", Token: now.UnixMilli() + 10_000_000, Released: o.k == 1,
			Expires: now.Add(-time.Millisecond)}
		s.Plant(r.t, rec)
		expires := span{rec.Expires, rec.Expires}
		for _, m := range rs.states {
			m.write(name, rec, &expires, &span{})
		}
		rs.tenures[name] = append(rs.tenures[name], tenure{rec.Holder, rec.Token})
		return fmt.Sprintf("plant %s: %s token %d, released %v, expired", name, rec.Holder, rec.Token, rec.Released), ""
	}
	x := rs.resolve(o)
	before, err := clock.Now(ctx)
	if err != nil {
		return describeOp(x), "read the store's clock: " + err.Error()
	}
	got := rs.exec(ctx, s.Store, x)
	after := before
	if !clock.Exact() {
		if after, err = clock.Now(ctx); err != nil {
			return describeOp(x), "read the store's clock: " + err.Error()
		}
	}
	line := fmt.Sprintf("%s at %v → %s", describeOp(x), r.rel(rs, before), describe(got))
	// The states of the worlds the store's outcome agrees with: those of
	// one shape as one, their spans widened to cover them all.
	var (
		next []*mstate
		whys []string
	)
	for _, m := range rs.states {
		for _, w := range r.worlds(rs, m, x, span{before, after}) {
			if why := r.compare(got, w); why != "" {
				whys = append(whys, fmt.Sprintf("the model says %s (%s)", describe(w.early), why))
				continue
			}
			next = addState(next, w.state)
		}
	}
	if next == nil {
		return line, fmt.Sprintf("the store says %s; %s", describe(got), strings.Join(slices.Compact(whys), "; or "))
	}
	result := got.err
	if result == "" {
		result = "ok"
	}
	r.count(x.kind, result)
	rs.states = next
	if (x.kind == opAcquire || x.kind == opSeize) && got.err == "" {
		for _, m := range rs.states {
			m.recs[x.name].rec.Token = got.rec.Token
		}
		rs.tenures[x.name] = append(rs.tenures[x.name], tenure{x.holder, got.rec.Token})
		rs.last = x.name
	}
	if os.Getenv("LEADERRUN_MODEL_DEBUG") != "" {
		for _, m := range rs.states {
			line += " " + m.String(rs.start)
		}
	}
	return line, ""
}

// addState adds m to the states, as one with a state of its shape if
// there is one, and keeps at most maxStates.
func addState(states []*mstate, m *mstate) []*mstate {
	for i, o := range states {
		if o.sameShape(m) {
			states[i] = o.union(m)
			return states
		}
	}
	if len(states) == maxStates {
		return states
	}
	return append(states, m)
}

// horizon bounds how far ahead a deadline a sequence goes to may lie:
// four times the longest duration it uses, past the ends of leases,
// candidates and ineligibilities that end within a sequence, and short
// of one that is to outlast it (an hour's), which a real clock would
// have to wait for.
func (r *modelRun) horizon() time.Duration {
	return 4 * max(slices.Max(r.h.TTLs), slices.Max(r.h.Windows))
}

func (r *modelRun) clockLine(ctx context.Context, s ModelStore, rs *runState, what string) (string, string) {
	now, err := s.Clock.Now(ctx)
	if err != nil {
		return what, "read the store's clock: " + err.Error()
	}
	return fmt.Sprintf("%s: now %v", what, r.rel(rs, now)), ""
}

// rel is t relative to the start of the run.
func (r *modelRun) rel(rs *runState, t time.Time) time.Duration { return t.Sub(rs.start) }

func describeOp(x resolved) string {
	var b strings.Builder
	b.WriteString(opNames[x.kind])
	b.WriteString(" " + x.name)
	switch x.kind {
	case opAcquire, opSeize:
		fmt.Fprintf(&b, " by %s for %v", x.holder, x.ttl)
		if x.kind == opSeize {
			fmt.Fprintf(&b, " from dead %s token %d", x.dead.Holder, x.dead.Token)
		}
	case opRenew:
		fmt.Fprintf(&b, " by %s token %d for %v", x.holder, x.token, x.ttl)
	case opAnnotate:
		fmt.Fprintf(&b, " by %s token %d where %q", x.holder, x.token, x.where)
	case opRelease:
		fmt.Fprintf(&b, " by %s token %d", x.holder, x.token)
	case opStepDown:
		fmt.Fprintf(&b, " to %q window %v", x.holder, x.ttl)
	case opJoin:
		fmt.Fprintf(&b, " %d partitions by %s for %v", x.k, x.holder, x.ttl)
	case opRenewMember:
		fmt.Fprintf(&b, " by %s claims %v for %v", x.holder, x.claims, x.ttl)
	case opLeave, opWithdraw:
		fmt.Fprintf(&b, " by %s", x.holder)
	case opCampaign:
		fmt.Fprintf(&b, " by %s for %v: priority %d preempt %v ineligible %v note %q", x.holder, x.ttl,
			x.cand.Priority, x.cand.Preempt, x.cand.Ineligible, x.cand.Note)
	}
	return b.String()
}

func describe(o outcome) string {
	var b strings.Builder
	switch {
	case o.err == "":
		b.WriteString("ok")
	case o.err == "partitions":
		fmt.Fprintf(&b, "partitions (have %d)", o.have)
	default:
		b.WriteString(o.err)
	}
	if o.rec != nil {
		b.WriteString(" " + describeRecord(*o.rec))
	}
	if o.group != nil {
		fmt.Fprintf(&b, " group of %d, members", o.group.Partitions)
		for _, m := range o.group.Members {
			fmt.Fprintf(&b, " %s(%v)", m.Identity, m.Remaining)
		}
		for p, rec := range o.group.Leases {
			fmt.Fprintf(&b, "; #%d %s", p, describeRecord(rec))
		}
	}
	for _, rec := range o.recs {
		fmt.Fprintf(&b, "; %s %s", rec.Name, describeRecord(rec))
	}
	if o.listed {
		b.WriteString(" candidates")
		for _, s := range o.cands {
			b.WriteString(" " + describeStanding(s))
		}
	}
	return b.String()
}

func describeRecord(r lease.Record) string {
	if !r.Exists() {
		return "[absent]"
	}
	s := fmt.Sprintf("[%s token %d left %v", r.Holder, r.Token, r.Remaining)
	if r.Released {
		s += " released"
	}
	if r.StepDown {
		s += " step-down"
	}
	if r.Successor != "" || r.Excluded != "" {
		s += fmt.Sprintf(" successor %q excluded %q reserved %v", r.Successor, r.Excluded, r.Reserved)
	}
	if r.Where != "" {
		s += fmt.Sprintf(" where %q", r.Where)
	}
	return s + "]"
}

// tolerance absorbs rounding to the stores' units (milliseconds).
const tolerance = time.Millisecond

// compare returns why the store's outcome got is not the world's w, or "".
func (r *modelRun) compare(got outcome, w world) string {
	e, l := w.early, w.late
	switch {
	case got.err != e.err:
		return fmt.Sprintf("the store's result %q, the model's %q", got.err, e.err)
	case got.err == "partitions" && got.have != e.have:
		return fmt.Sprintf("the store's partitions %d, the model's %d", got.have, e.have)
	case (got.rec == nil) != (e.rec == nil):
		return "a record where none was expected, or none where one was"
	case got.listed != e.listed:
		return "a list of candidates where none was expected, or none where one was"
	}
	if e.listed {
		if why := r.compareStandings(got.cands, e.cands, l.cands); why != "" {
			return why
		}
	}
	if e.rec != nil && got.rec != nil {
		if why := r.compareRecord(*got.rec, *e.rec, *l.rec); why != "" {
			return why
		}
	}
	if e.group != nil {
		if got.group == nil {
			return "no group"
		}
		if why := r.compareGroup(*got.group, *e.group, *l.group); why != "" {
			return why
		}
	}
	if e.recs != nil || got.recs != nil {
		if len(got.recs) != len(e.recs) {
			return fmt.Sprintf("the store lists %d records, the model %d", len(got.recs), len(e.recs))
		}
		for i := range got.recs {
			if why := r.compareRecord(got.recs[i], e.recs[i], l.recs[i]); why != "" {
				return why
			}
		}
	}
	return ""
}

func (r *modelRun) compareRecord(got, e, l lease.Record) string {
	switch {
	case got.Exists() != e.Exists():
		return fmt.Sprintf("%s exists in the store: %v, in the model: %v", e.Name, got.Exists(), e.Exists())
	case e.Name != "" && got.Name != e.Name:
		return fmt.Sprintf("the store's name %q, the model's %q", got.Name, e.Name)
	case !e.Exists():
		return ""
	case got.Holder != e.Holder || got.Released != e.Released || got.StepDown != e.StepDown ||
		got.Successor != e.Successor || got.Excluded != e.Excluded || got.Where != e.Where:
		return fmt.Sprintf("%s: the store's %s, the model's %s", e.Name, describeRecord(got), describeRecord(e))
	case got.Token < e.Token || got.Token > l.Token:
		return fmt.Sprintf("%s: the store's token %d, the model's %d … %d", e.Name, got.Token, e.Token, l.Token)
	}
	if !e.Released {
		if why := r.inRange("time left", got.Remaining, e.Remaining, l.Remaining); why != "" {
			return e.Name + ": " + why
		}
	}
	if e.Successor != "" || e.Excluded != "" {
		if why := r.inRange("reservation", got.Reserved, e.Reserved, l.Reserved); why != "" {
			return e.Name + ": " + why
		}
	} else if got.Reserved > tolerance {
		return fmt.Sprintf("%s: the store's reservation %v, the model's none", e.Name, got.Reserved)
	}
	return ""
}

// inRange checks a time left that the model puts between a and b: at most
// zero when both are, else within them (a store that is Late may say
// more).
func (r *modelRun) inRange(what string, v, a, b time.Duration) string {
	lo, hi := min(a, b), max(a, b)
	switch {
	case hi <= 0 && v > tolerance:
		return fmt.Sprintf("the store's %s %v, the model's none", what, v)
	case hi <= 0:
		return ""
	case v > hi+tolerance+r.h.Late:
		return fmt.Sprintf("the store's %s %v, the model's at most %v", what, v, hi)
	case lo > 0 && v < lo-tolerance:
		return fmt.Sprintf("the store's %s %v, the model's at least %v", what, v, lo)
	}
	return ""
}

func (r *modelRun) compareGroup(got, e, l lease.Group) string {
	switch {
	case got.Name != e.Name || got.Partitions != e.Partitions:
		return fmt.Sprintf("the store's group %q of %d partitions, the model's %q of %d", got.Name, got.Partitions, e.Name, e.Partitions)
	case !slices.Equal(got.Identities(), e.Identities()):
		return fmt.Sprintf("the store's members %q, the model's %q", got.Identities(), e.Identities())
	case len(got.Leases) != len(e.Leases):
		return fmt.Sprintf("the store's %d partition records, the model's %d", len(got.Leases), len(e.Leases))
	}
	for i, m := range got.Members {
		if why := r.inRange("member "+m.Identity+" time left", m.Remaining, e.Members[i].Remaining, l.Members[i].Remaining); why != "" {
			return why
		}
	}
	for p := range got.Leases {
		if why := r.compareRecord(got.Leases[p], e.Leases[p], l.Leases[p]); why != "" {
			return fmt.Sprintf("partition %d: %s", p, why)
		}
	}
	return ""
}

// run runs seq on the store and the model, on names of its own, and
// returns where they first disagreed, or nil.
func (r *modelRun) run(s ModelStore, seq []op) *failure {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs := &runState{n: r.namesOf(), states: []*mstate{newState()}, tenures: map[string][]tenure{}}
	start, err := s.Clock.Now(ctx)
	if err != nil {
		return &failure{why: "read the store's clock: " + err.Error()}
	}
	rs.start = start
	var trace []string
	for i, o := range seq {
		line, why := r.step(ctx, s, rs, o)
		trace = append(trace, fmt.Sprintf("%2d. %s", i+1, line))
		if why != "" {
			return &failure{at: i, why: why, trace: trace}
		}
	}
	return nil
}
