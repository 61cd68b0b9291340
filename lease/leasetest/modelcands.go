package leasetest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The candidacies of the model-based test (lease.Campaigner): what a
// candidate said of itself, how the model keeps it, and the operations
// Campaign, Withdraw, Candidates and Forget.

// mcand is a candidate in the model.
type mcand struct {
	seen span            // seen until; a lo of zero: possibly never recorded
	said lease.Candidacy // Priority, Preempt and Note; Ineligible is in inelig
	// inelig is when its ineligibility ends; the zero span: eligible.
	inelig span
}

// ineligible reports whether the candidate said it is ineligible for a
// while (which may have ended since).
func (mc mcand) ineligible() bool { return !mc.inelig.hi.IsZero() }

// saidAnything reports whether the candidate said more than the zero
// Candidacy.
func (mc mcand) saidAnything() bool { return mc.said != (lease.Candidacy{}) || mc.ineligible() }

// sameSaid reports whether mc and o said the same, whatever the spans.
func (mc mcand) sameSaid(o mcand) bool { return mc.said == o.said && mc.ineligible() == o.ineligible() }

// candidate is mc as a lease.Candidate of holder in c's run.
func (mc mcand) candidate(holder string, c *chooser) lease.Candidate {
	cd := lease.Candidate{Holder: holder, SeenUntil: c.at(mc.seen),
		Priority: mc.said.Priority, Preempt: mc.said.Preempt, Note: mc.said.Note}
	if mc.ineligible() {
		cd.IneligibleUntil = c.at(mc.inelig)
	}
	return cd
}

// candOf is cd, a candidate a rule returned in one run, in the model.
func candOf(cd lease.Candidate) mcand {
	mc := mcand{seen: span{cd.SeenUntil, cd.SeenUntil},
		said: lease.Candidacy{Priority: cd.Priority, Preempt: cd.Preempt, Note: cd.Note}}
	if !cd.IneligibleUntil.IsZero() {
		mc.inelig = span{cd.IneligibleUntil, cd.IneligibleUntil}
	}
	return mc
}

// again is holder's candidate old as an Acquire or Seize that records
// holder again leaves it: seen until 2×ttl after the operation, with what
// it said (lease.SeeAgain). A candidate no longer live may have been
// deleted before (stores prune them), and what it said with it: then the
// operation records it anew (lease.Seen). Which of the two is a question,
// when it said anything.
func again(old mcand, holder string, ttl time.Duration, c *chooser) mcand {
	now := c.now()
	if !c.live(&old.seen) && old.saidAnything() && c.question() {
		return candOf(lease.Seen(holder, ttl, now))
	}
	return candOf(lease.SeeAgain(old.candidate(holder, c), ttl, now))
}

// at is s in this run: its earliest or latest instant.
func (c *chooser) at(s span) time.Time {
	if c.late {
		return s.hi
	}
	return s.lo
}

// nowAgainst is the store's now in this run as far as a comparison of its
// clock in milliseconds with ms goes (lease.Forgettable): when the window
// straddles ms's millisecond, whether the clock has passed it is a
// question.
func (c *chooser) nowAgainst(ms int64) time.Time {
	if ms < c.w.lo.UnixMilli() || ms >= c.w.hi.UnixMilli() {
		return c.now()
	}
	if c.question() {
		return time.UnixMilli(ms) // not yet past
	}
	return time.UnixMilli(ms + 1)
}

// standings are name's live candidates at the operation, as Candidates
// reads them (a candidate whose end the window straddles is a question);
// Seen and Ineligible are measured, earliest or latest, and may be zero
// or negative where the model allows none.
func (m *mstate) standings(name string, c *chooser) []lease.Standing {
	out := []lease.Standing{}
	for _, h := range slices.Sorted(maps.Keys(m.cands[name])) {
		mc := m.cands[name][h]
		if c.live(&mc.seen) {
			st := mc.candidate(h, c).Standing(c.now())
			st.Seen = c.left(&mc.seen, false)
			if mc.ineligible() {
				st.Ineligible = c.left(&mc.inelig, false)
			}
			out = append(out, st)
		}
		m.cands[name][h] = mc
	}
	return out
}

// isCampaign reports whether k is an operation of lease.Campaigner.
func isCampaign(k opKind) bool {
	return k == opCampaign || k == opWithdraw || k == opCandidates || k == opForget
}

// campaignWeights are how often a sequence draws the operations of
// lease.Campaigner.
var campaignWeights = []opWeight{{opCampaign, 8}, {opWithdraw, 2}, {opCandidates, 5}, {opForget, 3}}

var (
	modelPriorities = []int32{0, 0, 1, 7, -3, math.MaxInt32, math.MinInt32}
	modelNotes      = []string{"", "", "unhealthy", `exit 1: "disk full"`, "é\n\t<>&'", strings.Repeat("é", lease.MaxNote/2)}
)

// drawCampaign fills in o, an operation of lease.Campaigner.
func (r *modelRun) drawCampaign(rnd *rand.Rand, o *op) {
	switch o.kind {
	case opCampaign:
		// Ineligibilities: none (also negative), some that end within a
		// sequence and one that outlasts it.
		ineligible := []time.Duration{0, 0, -time.Second, r.h.Steps[min(1, len(r.h.Steps)-1)],
			r.h.TTLs[0], 3 * r.h.TTLs[len(r.h.TTLs)-1], time.Hour}
		o.cand = lease.Candidacy{
			Priority:   modelPriorities[rnd.IntN(len(modelPriorities))],
			Preempt:    rnd.IntN(3) == 0,
			Ineligible: ineligible[rnd.IntN(len(ineligible))],
			Note:       modelNotes[rnd.IntN(len(modelNotes))],
		}
	case opForget:
		if rnd.IntN(2) == 0 {
			o.target = lastGranted
		}
	}
}

// execCampaign runs x, an operation of lease.Campaigner, on the store.
func execCampaign(ctx context.Context, cs lease.Campaigner, x resolved) outcome {
	switch x.kind {
	case opCampaign:
		return outcomeOf(nil, cs.Campaign(ctx, x.name, x.holder, x.cand, x.ttl))
	case opWithdraw:
		return outcomeOf(nil, cs.Withdraw(ctx, x.name, x.holder))
	case opCandidates:
		list, err := cs.Candidates(ctx, x.name)
		o := outcomeOf(nil, err)
		if err == nil {
			o.listed, o.cands = true, list
		}
		return o
	case opForget:
		return outcomeOf(nil, cs.Forget(ctx, x.name))
	}
	panic("not an operation of lease.Campaigner")
}

// applyCampaign runs x, an operation of lease.Campaigner, on the model's
// state m in the world c stands for.
func applyCampaign(m *mstate, x resolved, c *chooser) outcome {
	switch x.kind {
	case opCampaign:
		m.setCandidate(x.name, x.holder, candOf(lease.Campaign(x.holder, x.cand, x.ttl, c.now())))
		return outcome{}
	case opWithdraw:
		delete(m.cands[x.name], x.holder)
		return outcome{}
	case opCandidates:
		return outcome{listed: true, cands: m.standings(x.name, c)}
	case opForget:
		if m.recs[x.name] == nil {
			return outcomeOf(nil, lease.ErrNotFound)
		}
		cur := m.view(x.name, c, true)
		if err := lease.Forgettable(cur, c.nowAgainst(cur.Token)); err != nil {
			return outcomeOf(nil, err)
		}
		delete(m.recs, x.name)
		delete(m.cands, x.name)
		return outcome{}
	}
	panic("not an operation of lease.Campaigner")
}

// compareStandings returns why the store's candidates got are not the
// model's, e and l at the earliest and latest instants, or "".
func (r *modelRun) compareStandings(got, e, l []lease.Standing) string {
	holders := func(list []lease.Standing) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.Holder)
		}
		return out
	}
	if !slices.Equal(holders(got), holders(e)) {
		return fmt.Sprintf("the store's candidates %q, the model's %q", holders(got), holders(e))
	}
	for i, g := range got {
		want := e[i].Candidacy
		if g.Priority != want.Priority || g.Preempt != want.Preempt || g.Note != want.Note {
			return fmt.Sprintf("candidate %s: the store's %s, the model's %s", g.Holder, describeStanding(g), describeStanding(e[i]))
		}
		if why := r.inRange("time seen", g.Seen, e[i].Seen, l[i].Seen); why != "" {
			return "candidate " + g.Holder + ": " + why
		}
		if g.Seen <= 0 {
			return fmt.Sprintf("candidate %s: listed, but seen for %v more", g.Holder, g.Seen)
		}
		if why := r.inRange("ineligibility", g.Ineligible, e[i].Ineligible, l[i].Ineligible); why != "" {
			return "candidate " + g.Holder + ": " + why
		}
		if g.Ineligible < 0 {
			return fmt.Sprintf("candidate %s: ineligible for %v more (want zero once eligible)", g.Holder, g.Ineligible)
		}
	}
	return ""
}

func describeStanding(s lease.Standing) string {
	out := fmt.Sprintf("%s(seen %v", s.Holder, s.Seen)
	if s.Priority != 0 {
		out += fmt.Sprintf(" priority %d", s.Priority)
	}
	if s.Preempt {
		out += " preempt"
	}
	if s.Ineligible != 0 {
		out += fmt.Sprintf(" ineligible %v", s.Ineligible)
	}
	if s.Note != "" {
		out += fmt.Sprintf(" note %q", s.Note)
	}
	return out + ")"
}
