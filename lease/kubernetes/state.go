package kubernetes

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderrun/leaderrun/lease"
)

// rec is one lease's state: a name's, kept in its Lease's spec and
// annotations, or a partition's, kept in its group's Lease. Times are the
// server's, in microseconds since the Unix epoch, as a Lease's MicroTime.
type rec struct {
	Holder     string           `json:"holder,omitempty"`
	Token      int64            `json:"token,omitempty"`
	AcquiredUS int64            `json:"acquired,omitempty"`
	RenewedUS  int64            `json:"renewed,omitempty"`
	TTLMS      int64            `json:"ttlMs,omitempty"`
	Released   bool             `json:"released,omitempty"`
	StepDown   bool             `json:"stepDown,omitempty"`
	Successor  string           `json:"successor,omitempty"`
	Excluded   string           `json:"excluded,omitempty"`
	ReservedUS int64            `json:"reservedUntil,omitempty"`
	Where      string           `json:"where,omitempty"`
	Candidates map[string]int64 `json:"candidates,omitempty"` // identity → seen until

	// foreign marks a Lease held under a name by something other than
	// leaderrun (a client-go elector): Token is then made up from its
	// acquireTime, and prev is the last token leaderrun granted there.
	foreign bool
	prev    int64
	// attrs is what candidates said when they campaigned (annCandidacy),
	// by holder; only those of Candidates count and are written.
	attrs map[string]candidacy
	// heldUntilUS, when set, is the earliest a foreign holder's Lease is
	// free: its holder is taken to renew it until the Lease has stayed
	// unchanged for a lease duration, as client-go's electors judge it.
	heldUntilUS int64
}

// candidacy is what a candidate said when it campaigned: a
// lease.Candidacy, its ineligibility as an end by the server's clock.
type candidacy struct {
	Priority          int32  `json:"priority,omitempty"`
	Preempt           bool   `json:"preempt,omitempty"`
	IneligibleUntilUS int64  `json:"ineligibleUntil,omitempty"`
	Note              string `json:"note,omitempty"`
}

// empty reports a record that holds candidates alone: a name nobody was
// ever granted, for which a replica campaigned. It reads as no record.
func (r *rec) empty() bool { return !r.foreign && r.Token == 0 }

func us(t time.Time) int64        { return t.UnixMicro() }
func fromUS(v int64) time.Time    { return time.UnixMicro(v) }
func (r *rec) ttl() time.Duration { return time.Duration(r.TTLMS) * time.Millisecond }

// expiresUS is when the lease ends by the server's clock.
func (r *rec) expiresUS() int64 {
	return max(r.RenewedUS+r.TTLMS*1000, r.heldUntilUS)
}

// view is the record as of the server time lo, the earliest the server's
// clock may read: Remaining and Reserved are the longest they may be.
func (r *rec) view(name string, lo time.Time) lease.Record {
	if r.empty() {
		return lease.Record{Name: name}
	}
	out := lease.Record{
		Name:      name,
		Holder:    r.Holder,
		Token:     r.Token,
		Acquired:  fromUS(r.AcquiredUS),
		Renewed:   fromUS(r.RenewedUS),
		Expires:   fromUS(r.expiresUS()),
		Released:  r.Released,
		StepDown:  r.StepDown,
		Successor: r.Successor,
		Excluded:  r.Excluded,
		Where:     r.Where,
	}
	out.Remaining = out.Expires.Sub(lo)
	if r.ReservedUS != 0 {
		out.Reserved = fromUS(r.ReservedUS).Sub(lo)
	}
	return out
}

// held is the record as a holder judges its own tenure, at the server time
// hi, the latest the server's clock may read: a holder's lease ends as
// early as it may. A foreign holder's record, or none, is the zero Record:
// no leaderrun tenure holds it.
func (r *rec) held(hi time.Time) lease.Record {
	if r == nil || r.foreign {
		return lease.Record{}
	}
	return r.view("", hi)
}

// candidate is holder's candidate record (the zero Candidate if none).
func (r *rec) candidate(holder string) lease.Candidate {
	until, ok := r.Candidates[holder]
	if !ok {
		return lease.Candidate{}
	}
	a := r.attrs[holder]
	c := lease.Candidate{Holder: holder, SeenUntil: fromUS(until), Priority: a.Priority, Preempt: a.Preempt, Note: a.Note}
	if a.IneligibleUntilUS != 0 {
		c.IneligibleUntil = fromUS(a.IneligibleUntilUS)
	}
	return c
}

// seeAgain is the candidate a refusal of holder at now records: its
// candidacy seen again (lease.SeeAgain), what it said kept, or a new one
// (lease.Seen).
func (r *rec) seeAgain(holder string, ttl time.Duration, now time.Time) lease.Candidate {
	if _, ok := r.Candidates[holder]; ok {
		return lease.SeeAgain(r.candidate(holder), ttl, now)
	}
	return lease.Seen(holder, ttl, now)
}

// see records c as a candidate, refused at now with ttl; it reports
// whether that changed what is stored (a candidate still Fresh is not
// written again).
func (r *rec) see(c lease.Candidate, ttl time.Duration, now time.Time) bool {
	if r.candidate(c.Holder).Fresh(ttl, now) {
		return false
	}
	r.setCandidate(c)
	return true
}

// setCandidate records c, what it said included, in r's maps, which it
// copies first: r may share them with the record it was copied from.
func (r *rec) setCandidate(c lease.Candidate) {
	r.Candidates, r.attrs = cloneMap(r.Candidates), cloneMap(r.attrs)
	if r.Candidates == nil {
		r.Candidates = map[string]int64{}
	}
	r.Candidates[c.Holder] = us(c.SeenUntil)
	a := candidacy{Priority: c.Priority, Preempt: c.Preempt, Note: c.Note}
	if !c.IneligibleUntil.IsZero() {
		a.IneligibleUntilUS = us(c.IneligibleUntil)
	}
	delete(r.attrs, c.Holder)
	if a != (candidacy{}) {
		if r.attrs == nil {
			r.attrs = map[string]candidacy{}
		}
		r.attrs[c.Holder] = a
	}
}

// said is what r's candidates said, less what no candidate of r said
// (one a leaderrun that does not know it dropped); nil for nothing.
func (r *rec) said() map[string]candidacy {
	var out map[string]candidacy
	for id, a := range r.attrs {
		if _, ok := r.Candidates[id]; ok {
			if out == nil {
				out = map[string]candidacy{}
			}
			out[id] = a
		}
	}
	return out
}

// decodeCandidacy reads annCandidacy's value into v; a value that does
// not decode (a later version's) says nothing.
func decodeCandidacy(l *coordv1.Lease, v any) {
	if s := l.Annotations[annCandidacy]; s != "" {
		_ = json.Unmarshal([]byte(s), v)
	}
}

// encodeCandidacy writes v, or removes the annotation for nothing.
func encodeCandidacy(l *coordv1.Lease, v any, nothing bool) {
	if nothing {
		delete(l.Annotations, annCandidacy)
		return
	}
	b, _ := json.Marshal(v)
	l.Annotations[annCandidacy] = string(b)
}

// liveCandidates are r's candidates still seen at lo: a grant ends no
// candidacy, not even the new holder's (seen until its refusal's now +
// 2×ttl, as the contract says), and drops those that ended.
func (r *rec) liveCandidates(lo time.Time) map[string]int64 {
	var out map[string]int64
	for id, until := range r.Candidates {
		if r.candidate(id).Live(lo) {
			if out == nil {
				out = map[string]int64{}
			}
			out[id] = until
		}
	}
	return out
}

// nameState is what a name's Lease keeps in its state annotation: the
// record less what its spec and the token and holder annotations hold.
func (r *rec) nameState() rec {
	s := *r
	s.Holder, s.Token, s.AcquiredUS, s.RenewedUS, s.TTLMS = "", 0, 0, 0, 0
	return s
}

// decodeName reads a name's record from its Lease.
func decodeName(l *coordv1.Lease) (*rec, error) {
	var r rec
	if s := l.Annotations[annState]; s != "" {
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return nil, fmt.Errorf("lease %s: annotation %s: %w", l.Name, annState, err)
		}
	}
	token, _ := strconv.ParseInt(l.Annotations[annToken], 10, 64)
	holder := l.Annotations[annHolder]
	spec := l.Spec
	specHolder := ""
	if spec.HolderIdentity != nil {
		specHolder = *spec.HolderIdentity
	}
	if spec.AcquireTime != nil {
		r.AcquiredUS = us(spec.AcquireTime.Time)
	}
	if spec.RenewTime != nil {
		r.RenewedUS = us(spec.RenewTime.Time)
	}
	if spec.LeaseDurationSeconds != nil {
		r.TTLMS = int64(*spec.LeaseDurationSeconds) * 1000
	}
	decodeCandidacy(l, &r.attrs)
	if _, ok := l.Annotations[annState]; ok && token == 0 && holder == "" && specHolder == "" && spec.AcquireTime == nil && spec.RenewTime == nil {
		return &r, nil // candidates alone (empty)
	}
	ours := token > 0 && holder != "" && (specHolder == holder || (specHolder == "" && r.Released))
	if ours {
		r.Holder, r.Token = holder, token
		return &r, nil
	}
	// Someone else's Lease, or one edited by hand: its spec decides.
	r = rec{
		Holder: specHolder, AcquiredUS: r.AcquiredUS, RenewedUS: r.RenewedUS, TTLMS: r.TTLMS,
		Released: specHolder == "", Candidates: r.Candidates, attrs: r.attrs,
		foreign: true, prev: token,
	}
	r.Token = max(1, r.AcquiredUS/1000)
	return &r, nil
}

// encodeName writes r into l, a name's Lease: transitions counts a change
// of holder, as client-go's electors count it. A foreign record only
// updates the candidates.
func encodeName(l *coordv1.Lease, name string, r *rec) {
	setMeta(l, kindName, name)
	if !r.foreign && !r.empty() {
		holder := r.Holder
		if r.Released {
			holder = "" // free for client-go's electors too
		}
		secs := int32(min((r.TTLMS+999)/1000, 1<<30))
		acq, ren := metav1.NewMicroTime(fromUS(r.AcquiredUS)), metav1.NewMicroTime(fromUS(r.RenewedUS))
		l.Spec.HolderIdentity = &holder
		l.Spec.LeaseDurationSeconds = &secs
		l.Spec.AcquireTime, l.Spec.RenewTime = &acq, &ren
		l.Annotations[annToken] = strconv.FormatInt(r.Token, 10)
		l.Annotations[annHolder] = r.Holder
	}
	state := r.nameState()
	if r.foreign {
		state = rec{Candidates: r.Candidates}
	}
	b, _ := json.Marshal(state)
	l.Annotations[annState] = string(b)
	said := r.said()
	encodeCandidacy(l, said, said == nil)
}

func setMeta(l *coordv1.Lease, kind, name string) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[labelManagedBy] = managedBy
	l.Labels[labelKind] = kind
	l.Annotations[annName] = name
}

// groupState is a group's Lease: its number of partitions (zero until
// the first Join, when a partition was acquired before), its members'
// expiries, and its partitions' records.
type groupState struct {
	Partitions int              `json:"partitions,omitempty"`
	Members    map[string]int64 `json:"members,omitempty"` // identity → expires, µs
	Leases     map[int]*rec     `json:"leases,omitempty"`
}

func decodeGroup(l *coordv1.Lease) (*groupState, error) {
	var g groupState
	if err := json.Unmarshal([]byte(l.Annotations[annGroup]), &g); err != nil {
		return nil, fmt.Errorf("lease %s: annotation %s: %w", l.Name, annGroup, err)
	}
	var said map[int]map[string]candidacy
	decodeCandidacy(l, &said)
	for p, r := range g.Leases {
		if r != nil {
			r.attrs = said[p]
		}
	}
	return &g, nil
}

// encodeGroup writes g into l, dropping members that expired a while ago.
func encodeGroup(l *coordv1.Lease, group string, g *groupState, lo time.Time) {
	setMeta(l, kindGroup, group)
	for id, exp := range g.Members {
		if exp < us(lo.Add(-time.Minute)) {
			delete(g.Members, id)
		}
	}
	b, _ := json.Marshal(g)
	l.Annotations[annGroup] = string(b)
	var said map[int]map[string]candidacy
	for p, r := range g.Leases {
		if r == nil {
			continue
		}
		if a := r.said(); a != nil {
			if said == nil {
				said = map[int]map[string]candidacy{}
			}
			said[p] = a
		}
	}
	encodeCandidacy(l, said, said == nil)
}

// view is the group as of the server time lo.
func (g *groupState) view(group string, lo time.Time) lease.Group {
	out := lease.Group{Name: group, Partitions: g.Partitions, Leases: make([]lease.Record, g.Partitions)}
	until := make(map[string]time.Time, len(g.Members))
	for id, exp := range g.Members {
		until[id] = fromUS(exp)
	}
	out.Members = lease.LiveMembers(until, lo)
	for p := range out.Leases {
		key := lease.PartitionKey(group, p)
		if r := g.Leases[p]; r != nil {
			out.Leases[p] = r.view(key, lo)
		} else {
			out.Leases[p] = lease.Record{Name: key}
		}
	}
	return out
}
