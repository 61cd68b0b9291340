package leasetest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The model's side of the model-based test: the store's state as the lease
// rules make it. Times on the store's clock are spans, known to lie
// between two instants: on a virtual clock a span is one instant; on a
// real one, an operation happened somewhere between the clock readings
// taken before and after it, so what it wrote is known within that window.
// Where a window straddles a deadline, the rules may go either way; each
// way is a world of its own, and the store's outcome picks the worlds.
// Where outcomes cannot tell worlds apart, the model keeps every state
// they may have left, until later outcomes rule some out.

// span is a time on the store's clock known to lie in [lo, hi]. A lo of
// zero: possibly never (a candidate a store may not have recorded).
type span struct{ lo, hi time.Time }

func (s span) shift(d time.Duration) span { return span{s.lo.Add(d), s.hi.Add(d)} }

// union is a time that is either s or o.
func (s span) union(o span) span {
	lo, hi := s.lo, s.hi
	if o.lo.Before(lo) {
		lo = o.lo
	}
	if o.hi.After(hi) {
		hi = o.hi
	}
	return span{lo, hi}
}

// mrec is a name's record in the model.
type mrec struct {
	rec      lease.Record // holder, token, flags and Where; no times
	expires  span
	reserved span // when rec.Successor or rec.Excluded is set
	// rounds is the member whose renewal rounds have claimed this
	// tenure (ModelHarness.ReleasesUnclaimed).
	rounds string
}

func (r *mrec) reserving() bool { return r.rec.Successor != "" || r.rec.Excluded != "" }

type mgroup struct {
	partitions int
	members    map[string]span
}

// mstate is the model's store: records, candidates and groups.
type mstate struct {
	recs   map[string]*mrec
	cands  map[string]map[string]mcand // name → holder → candidate
	groups map[string]*mgroup
}

func newState() *mstate {
	return &mstate{recs: map[string]*mrec{}, cands: map[string]map[string]mcand{}, groups: map[string]*mgroup{}}
}

func (m *mstate) clone() *mstate {
	c := newState()
	for k, r := range m.recs {
		cp := *r
		c.recs[k] = &cp
	}
	for k, cs := range m.cands {
		c.cands[k] = maps.Clone(cs)
	}
	for k, g := range m.groups {
		c.groups[k] = &mgroup{partitions: g.partitions, members: maps.Clone(g.members)}
	}
	return c
}

// merge is the state that the early (earliest instants) and late runs of
// one world made: each span from the early run's lo to the late run's hi.
func merge(early, late *mstate) *mstate {
	out := early.clone()
	for k, r := range out.recs {
		l := late.recs[k]
		r.expires.hi, r.reserved.hi = l.expires.hi, l.reserved.hi
	}
	for k, cs := range out.cands {
		for h, mc := range cs {
			l := late.cands[k][h]
			mc.seen.hi, mc.inelig.hi = l.seen.hi, l.inelig.hi
			cs[h] = mc
		}
	}
	for k, g := range out.groups {
		for id, s := range g.members {
			g.members[id] = span{s.lo, late.groups[k].members[id].hi}
		}
	}
	return out
}

// union is a state that is either m or o, which have the same shape
// (sameShape) and differ only in their spans: it widens them to cover
// both.
func (m *mstate) union(o *mstate) *mstate {
	out := m.clone()
	for k, r := range out.recs {
		r.expires, r.reserved = r.expires.union(o.recs[k].expires), r.reserved.union(o.recs[k].reserved)
	}
	for k, cs := range out.cands {
		for h, mc := range cs {
			oc := o.cands[k][h]
			mc.seen, mc.inelig = mc.seen.union(oc.seen), mc.inelig.union(oc.inelig)
			cs[h] = mc
		}
	}
	for k, g := range out.groups {
		for id, s := range g.members {
			g.members[id] = s.union(o.groups[k].members[id])
		}
	}
	return out
}

// sameShape reports whether m and o have the same records, candidates and
// groups, whatever their spans.
func (m *mstate) sameShape(o *mstate) bool {
	if len(m.recs) != len(o.recs) || len(m.cands) != len(o.cands) || len(m.groups) != len(o.groups) {
		return false
	}
	for k, r := range m.recs {
		if or, ok := o.recs[k]; !ok || or.rec != r.rec || or.rounds != r.rounds {
			return false
		}
	}
	for k, cs := range m.cands {
		if !sameKeys(cs, o.cands[k]) {
			return false
		}
		for h, mc := range cs {
			if !mc.sameSaid(o.cands[k][h]) {
				return false
			}
		}
	}
	for k, g := range m.groups {
		if og, ok := o.groups[k]; !ok || og.partitions != g.partitions || !sameKeys(g.members, og.members) {
			return false
		}
	}
	return true
}

func sameKeys[V any](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// chooser answers, for one run of the rules in one world, what time it is
// and whether deadlines have passed.
type chooser struct {
	w    span // when the operation happened
	late bool // instants and durations at their latest, else earliest
	// lag is how much later a lease written now may end (ModelHarness.Late).
	lag time.Duration
	// forced holds the answers to the questions, in the order asked;
	// questions beyond it are answered no. asked records the answers.
	forced, asked []bool
}

// question answers a question the rules leave open in this world.
func (c *chooser) question() bool {
	i := len(c.asked)
	ans := i < len(c.forced) && c.forced[i]
	c.asked = append(c.asked, ans)
	return ans
}

// now is the instant of the operation in this run.
func (c *chooser) now() time.Time {
	if c.late {
		return c.w.hi
	}
	return c.w.lo
}

// after is the instant d after the operation, in this run.
func (c *chooser) after(d time.Duration) span { t := c.now().Add(d); return span{t, t} }

// expiry is when a lease written now with ttl ends, in this run.
func (c *chooser) expiry(ttl time.Duration) span {
	s := c.after(ttl)
	if c.late {
		s = s.shift(c.lag)
	}
	return s
}

// live reports whether d is still ahead at the operation. When the window
// straddles d it is a question, and d is narrowed to agree with the
// answer.
func (c *chooser) live(d *span) bool {
	switch {
	case c.w.hi.Before(d.lo):
		return true
	case !c.w.lo.Before(d.hi):
		return false
	}
	if c.question() {
		if !d.lo.After(c.w.lo) {
			d.lo = c.w.lo.Add(time.Nanosecond)
		}
		return true
	}
	if d.hi.After(c.w.hi) {
		d.hi = c.w.hi
	}
	return false
}

// left is the time from the operation until d, earliest or latest; with
// decide, positive exactly when d is live (asking if need be).
func (c *chooser) left(d *span, decide bool) time.Duration {
	var v time.Duration
	if c.late {
		v = d.hi.Sub(c.w.lo)
	} else {
		v = d.lo.Sub(c.w.hi)
	}
	if !decide {
		return v
	}
	if c.live(d) {
		return max(v, time.Nanosecond)
	}
	return min(v, 0)
}

// view is name's record at the operation; the zero Record when absent.
// With rules, the lease's and the reservation's time left decide (they
// are positive exactly when live); without, they are only measured.
func (m *mstate) view(name string, c *chooser, rules bool) lease.Record {
	r := m.recs[name]
	if r == nil {
		return lease.Record{}
	}
	v := r.rec
	v.Name = name
	v.Remaining = c.left(&r.expires, rules && !r.rec.Released)
	if r.reserving() {
		v.Reserved = c.left(&r.reserved, rules)
	}
	return v
}

// write makes rec, as a rule returned it, name's record; expires is when
// its lease ends and reserved when its reservation does, or nil to keep
// them.
func (m *mstate) write(name string, rec lease.Record, expires, reserved *span) {
	r := m.recs[name]
	if r == nil {
		r = &mrec{}
		m.recs[name] = r
	}
	if expires != nil {
		r.expires = *expires
	}
	if reserved != nil {
		r.reserved = *reserved
	}
	rec.Acquired, rec.Renewed, rec.Expires, rec.Remaining, rec.Reserved = time.Time{}, time.Time{}, time.Time{}, 0, 0
	r.rec = rec
}

// see records holder as a candidate for name after a refusal with ttl
// (lease.Seen, or lease.SeeAgain keeping what it said); a store that
// KeepsFresh may have kept a Fresh one.
func (m *mstate) see(name, holder string, ttl time.Duration, c *chooser, keepsFresh bool) {
	seen := c.after(2 * ttl)
	old, ok := m.cands[name][holder]
	if !ok {
		m.setCandidate(name, holder, mcand{seen: seen})
		return
	}
	next := again(old, holder, ttl, c)
	if keepsFresh && old.seen.hi.After(c.w.lo.Add(ttl)) {
		next.seen = old.seen.union(seen)
	}
	m.setCandidate(name, holder, next)
}

// seeGranted records that a store that SeesGranted may have recorded
// holder, granted name with ttl, as a candidate, keeping what it said.
func (m *mstate) seeGranted(name, holder string, ttl time.Duration, c *chooser) {
	seen := c.after(2 * ttl)
	old, ok := m.cands[name][holder]
	if !ok {
		m.setCandidate(name, holder, mcand{seen: span{hi: seen.hi}})
		return
	}
	next := again(old, holder, ttl, c)
	next.seen = old.seen.union(seen)
	m.setCandidate(name, holder, next)
}

func (m *mstate) setCandidate(name, holder string, mc mcand) {
	if m.cands[name] == nil {
		m.cands[name] = map[string]mcand{}
	}
	m.cands[name][holder] = mc
}

// liveSuccessor reports whether successor is a live successor for name
// (lease.LiveSuccessor) at the operation.
func (m *mstate) liveSuccessor(name, successor string, c *chooser) bool {
	now := c.now()
	var cand lease.Candidate
	if mc, ok := m.cands[name][successor]; ok && c.live(&mc.seen) {
		cand = lease.Candidate{Holder: successor, SeenUntil: now.Add(time.Hour)}
		m.cands[name][successor] = mc
	}
	var memberUntil time.Time
	if group, _, ok := lease.SplitPartitionKey(name); ok && !cand.Live(now) {
		if g := m.groups[group]; g != nil {
			if s, ok := g.members[successor]; ok && c.live(&s) {
				memberUntil = now.Add(time.Hour)
				g.members[successor] = s
			}
		}
	}
	return lease.LiveSuccessor(name, cand, memberUntil, now)
}

// group is a group's view at the operation: its live members (a member
// whose expiry the window straddles is a question) and its partitions.
func (m *mstate) group(name string, c *chooser) lease.Group {
	g := m.groups[name]
	out := lease.Group{Name: name, Partitions: g.partitions, Leases: make([]lease.Record, g.partitions)}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		s := g.members[id]
		if c.live(&s) {
			out.Members = append(out.Members, lease.Member{Identity: id, Remaining: max(c.left(&s, false), time.Nanosecond)})
		}
		g.members[id] = s
	}
	for p := range out.Leases {
		key := lease.PartitionKey(name, p)
		out.Leases[p] = m.view(key, c, false)
		out.Leases[p].Name = key
	}
	return out
}

// list is every record whose name starts with prefix, ordered by name.
func (m *mstate) list(prefix string, c *chooser) []lease.Record {
	var out []lease.Record
	for _, name := range slices.Sorted(maps.Keys(m.recs)) {
		if strings.HasPrefix(name, prefix) {
			out = append(out, m.view(name, c, false))
		}
	}
	return out
}

// deadlines are the instants ahead of now at which something in the state
// changes: leases' and reservations' ends, candidates' and their
// ineligibilities', members'; those within horizon.
func (m *mstate) deadlines(now time.Time, horizon time.Duration) []time.Time {
	var out []time.Time
	add := func(s span) {
		if s.lo.After(now) && s.lo.Sub(now) <= horizon {
			out = append(out, s.lo)
		}
	}
	for _, r := range m.recs {
		if !r.rec.Released {
			add(r.expires)
		}
		if r.reserving() {
			add(r.reserved)
		}
	}
	for _, cs := range m.cands {
		for _, mc := range cs {
			add(mc.seen)
			add(mc.inelig)
		}
	}
	for _, g := range m.groups {
		for _, s := range g.members {
			add(s)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return slices.Compact(out)
}

// String shows the state's records, candidates and members, times
// relative to start (LEADERRUN_MODEL_DEBUG puts it in a failure's trace).
func (m *mstate) String(start time.Time) string {
	var b strings.Builder
	rel := func(s span) string {
		if s.lo.IsZero() {
			return fmt.Sprintf("[never … %v]", s.hi.Sub(start))
		}
		return fmt.Sprintf("[%v … %v]", s.lo.Sub(start), s.hi.Sub(start))
	}
	for _, k := range slices.Sorted(maps.Keys(m.recs)) {
		r := m.recs[k]
		fmt.Fprintf(&b, "{%s %s token %d released %v ends %s", k, r.rec.Holder, r.rec.Token, r.rec.Released, rel(r.expires))
		if r.reserving() {
			fmt.Fprintf(&b, " reserved %s", rel(r.reserved))
		}
		if r.rounds != "" {
			fmt.Fprintf(&b, " rounds %s", r.rounds)
		}
		b.WriteString("} ")
	}
	for _, k := range slices.Sorted(maps.Keys(m.cands)) {
		for _, h := range slices.Sorted(maps.Keys(m.cands[k])) {
			mc := m.cands[k][h]
			fmt.Fprintf(&b, "{candidate %s %s %s", k, h, rel(mc.seen))
			if mc.said != (lease.Candidacy{}) {
				fmt.Fprintf(&b, " priority %d preempt %v note %q", mc.said.Priority, mc.said.Preempt, mc.said.Note)
			}
			if !mc.inelig.hi.IsZero() {
				fmt.Fprintf(&b, " ineligible %s", rel(mc.inelig))
			}
			b.WriteString("} ")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.groups)) {
		for _, id := range slices.Sorted(maps.Keys(m.groups[k].members)) {
			fmt.Fprintf(&b, "{member %s %s %s} ", k, id, rel(m.groups[k].members[id]))
		}
	}
	return b.String()
}
