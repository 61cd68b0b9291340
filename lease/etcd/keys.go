package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/lease"
)

// The keys under the store's prefix P. Names and identities are
// %-escaped (url.PathEscape), so that they contain no '/' and one key
// range never covers another name's keys.
//
//	P/n/NAME/record            the tenure's record (JSON, no lease): holder,
//	                           token, times, step-down, Where; the last token
//	P/n/NAME/lease             "TOKEN HOLDER", attached to the tenure's etcd
//	                           lease: it exists while the tenure lives
//	P/n/NAME/released          "TOKEN" of the tenure its holder released
//	P/c/NAME/HOLDER            a candidate: until when, in Unix ms (no lease)
//	P/a/NAME/HOLDER            what the candidate said when it campaigned
//	                           (JSON, attrsValue; no lease): it counts while
//	                           the candidate key has lived since it was
//	                           written (see attrsValid)
//	P/g/GROUP/n                the group's number of partitions (no lease)
//	P/g/GROUP/m/MEMBER         a member (JSON), attached to its etcd lease
//	P/g/GROUP/p/P/record …     partition P's keys, as a name's above
//
// A partition's keys live under its group, so that one range read or watch
// of P/g/GROUP/ sees the whole group.

// nameKeys are the keys of one lease name.
type nameKeys struct {
	name     string
	base     string // prefix of the name's own keys, ending in '/'
	record   string
	lease    string
	released string
	// candidates is the prefix of the name's candidate keys, ending in '/'.
	candidates string
	// attrs is the prefix of their attributes' keys, ending in '/'.
	attrs string
}

func (s *Store) keysOf(name string) nameKeys {
	var base string
	if group, p, ok := lease.SplitPartitionKey(name); ok {
		base = s.groupBase(group) + "p/" + strconv.Itoa(p) + "/"
	} else {
		base = s.prefix + "/n/" + escape(name) + "/"
	}
	return nameKeys{
		name: name, base: base,
		record: base + "record", lease: base + "lease", released: base + "released",
		candidates: s.prefix + "/c/" + escape(name) + "/",
		attrs:      s.prefix + "/a/" + escape(name) + "/",
	}
}

func (s *Store) groupBase(group string) string { return s.prefix + "/g/" + escape(group) + "/" }

// memberKey is the key of member's record in group.
func (s *Store) memberKey(group, member string) string {
	return s.groupBase(group) + "m/" + escape(member)
}

func escape(s string) string { return url.PathEscape(s) }

func unescape(s string) (string, error) { return url.PathUnescape(s) }

// recordValue is the JSON of a record key. Times are the wall clock of the
// replica that wrote them, in Unix milliseconds.
type recordValue struct {
	Holder     string `json:"holder"`
	Token      int64  `json:"token"`
	AcquiredMs int64  `json:"acquired_ms"`
	StepDown   bool   `json:"step_down,omitempty"`
	Successor  string `json:"successor,omitempty"`
	Excluded   string `json:"excluded,omitempty"`
	// ReservedUntilMs ends the step-down reservation.
	ReservedUntilMs int64  `json:"reserved_until_ms,omitempty"`
	Where           string `json:"where,omitempty"`
}

func (r recordValue) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings and numbers always marshal
	}
	return string(b)
}

// tenureValue is the value of a lease key: the tenure it stands for.
func tenureValue(token int64, holder string) string {
	return strconv.FormatInt(token, 10) + " " + holder
}

// memberValue is the JSON of a member key.
type memberValue struct {
	// UntilMs is the wall-clock time, in Unix milliseconds, until which the
	// member's last Join or renewal round made it a member.
	UntilMs int64 `json:"until_ms"`
	TTLMs   int64 `json:"ttl_ms"`
}

func (m memberValue) encode() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// nameState is what a read of a name's keys found.
type nameState struct {
	found   bool // the record exists
	rec     recordValue
	recRev  int64            // the record's ModRevision; 0 when absent
	leaseKV *mvccpb.KeyValue // the lease key; nil when absent
	// released reports a released key that names the record's token.
	released      bool
	releasedToken string // the released key's value
	candidates    []candidate
	// attrs are the attributes keys read, by holder; finish files each
	// into its candidate, and orphans lists the others.
	attrs   map[string]*mvccpb.KeyValue
	orphans []*mvccpb.KeyValue
	// times is what etcd said of leases' time left while the keys were
	// read, if it was asked (nil otherwise).
	times map[clientv3.LeaseID]leaseTime
}

type candidate struct {
	key     string
	holder  string
	untilMs int64
	rev     int64 // the candidate key's ModRevision
	created int64 // its CreateRevision
	// attrs is what the candidate said when it campaigned (see
	// attrsValid), with attrsKey and attrsRev its key and ModRevision;
	// the zero attrsValue, and no key, when it said nothing.
	attrs    attrsValue
	attrsKey string
	attrsRev int64
}

// attrsValue is the JSON of an attributes key: a lease.Candidacy, its
// ineligibility as an end in Unix ms (the wall clock of the replica that
// wrote it, as a candidate key's until).
type attrsValue struct {
	Priority          int32  `json:"priority,omitempty"`
	Preempt           bool   `json:"preempt,omitempty"`
	IneligibleUntilMs int64  `json:"ineligible_until_ms,omitempty"`
	Note              string `json:"note,omitempty"`
}

func (a attrsValue) encode() string {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err) // strings and numbers always marshal
	}
	return string(b)
}

// attrsOf is what c says of itself, as stored.
func attrsOf(c lease.Candidate) attrsValue {
	a := attrsValue{Priority: c.Priority, Preempt: c.Preempt, Note: c.Note}
	if !c.IneligibleUntil.IsZero() {
		a.IneligibleUntilMs = c.IneligibleUntil.UnixMilli()
	}
	return a
}

// model is c as the lease rules see it.
func (c candidate) model() lease.Candidate {
	out := lease.Candidate{Holder: c.holder, SeenUntil: time.UnixMilli(c.untilMs),
		Priority: c.attrs.Priority, Preempt: c.attrs.Preempt, Note: c.attrs.Note}
	if c.attrs.IneligibleUntilMs != 0 {
		out.IneligibleUntil = time.UnixMilli(c.attrs.IneligibleUntilMs)
	}
	return out
}

// attrsValid reports whether an attributes key written at attrsRev belongs
// to the candidate key created at created: Campaign writes both in one
// transaction, and a refusal rewrites the candidate key alone, which
// keeps its CreateRevision. A candidate key created later (a leaderrun
// that knows no attributes swept the candidate and recorded it again)
// makes the attributes an orphan's, which count for nothing.
func attrsValid(attrsRev, created int64) bool { return attrsRev >= created }

// leaseRev is the lease key's ModRevision, 0 when absent.
func (st nameState) leaseRev() int64 {
	if st.leaseKV == nil {
		return 0
	}
	return st.leaseKV.ModRevision
}

// held reports whether the tenure lives: its lease key exists, so its etcd
// lease has not been revoked.
func (st nameState) held() bool { return st.leaseKV != nil }

// heldBy reports whether the lease key stands for holder's tenure token.
func (st nameState) heldBy(holder string, token int64) bool {
	return st.leaseKV != nil && string(st.leaseKV.Value) == tenureValue(token, holder)
}

// add files kv, a key under the name's base or candidates prefix, into st.
func (st *nameState) add(k nameKeys, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	switch {
	case key == k.record:
		if err := json.Unmarshal(kv.Value, &st.rec); err != nil {
			return fmt.Errorf("key %s: %w", key, err)
		}
		st.found, st.recRev = true, kv.ModRevision
	case key == k.lease:
		st.leaseKV = kv
	case key == k.released:
		st.releasedToken = string(kv.Value)
	case strings.HasPrefix(key, k.candidates):
		holder, err := url.PathUnescape(strings.TrimPrefix(key, k.candidates))
		if err != nil {
			return nil // not one of ours
		}
		until, _ := strconv.ParseInt(string(kv.Value), 10, 64)
		st.candidates = append(st.candidates, candidate{key: key, holder: holder, untilMs: until, rev: kv.ModRevision, created: kv.CreateRevision})
	case strings.HasPrefix(key, k.attrs):
		holder, err := url.PathUnescape(strings.TrimPrefix(key, k.attrs))
		if err != nil {
			return nil // not one of ours
		}
		if st.attrs == nil {
			st.attrs = map[string]*mvccpb.KeyValue{}
		}
		st.attrs[holder] = kv
	}
	return nil
}

// finish settles what add could not decide alone: whether the released key
// names the record's token, and which candidate each attributes key
// belongs to.
func (st *nameState) finish() {
	st.released = st.found && !st.held() && st.releasedToken == strconv.FormatInt(st.rec.Token, 10)
	if st.attrs == nil {
		return
	}
	for i := range st.candidates {
		c := &st.candidates[i]
		kv := st.attrs[c.holder]
		if kv == nil || !attrsValid(kv.ModRevision, c.created) {
			continue
		}
		c.attrsKey, c.attrsRev = string(kv.Key), kv.ModRevision
		// Attributes that do not decode (a later version's) say
		// nothing: the zero Candidacy.
		_ = json.Unmarshal(kv.Value, &c.attrs)
	}
	st.orphans = st.orphans[:0]
	for holder, kv := range st.attrs {
		if st.candidate(holder).attrsKey != string(kv.Key) {
			st.orphans = append(st.orphans, kv)
		}
	}
	st.attrs = nil
}

// parseName builds the state of k from the kvs of a read.
func parseName(k nameKeys, kvs ...[]*mvccpb.KeyValue) (nameState, error) {
	var st nameState
	for _, list := range kvs {
		for _, kv := range list {
			if err := st.add(k, kv); err != nil {
				return st, err
			}
		}
	}
	st.finish()
	return st, nil
}

// candidate returns holder's candidate key as read (with a zero until
// and revision when there is none).
func (st nameState) candidate(holder string) candidate {
	for _, c := range st.candidates {
		if c.holder == holder {
			return c
		}
	}
	return candidate{}
}

// stale returns up to max candidates that ended before now, and up to max
// in all with them attributes keys that belong to no candidate.
func (st nameState) stale(nowMs int64, max int) ([]candidate, []*mvccpb.KeyValue) {
	var out []candidate
	for _, c := range st.candidates {
		if c.untilMs < nowMs && len(out) < max {
			out = append(out, c)
		}
	}
	return out, st.orphans[:min(len(st.orphans), max-len(out))]
}

// view is the lease.Record of st at now, with left the time until the
// tenure's etcd lease frees the name at the latest (see leaseTime); left
// matters only while the lease key exists.
func (st nameState) view(name string, now time.Time, left leaseTime) lease.Record {
	if !st.found {
		return lease.Record{}
	}
	r := lease.Record{
		Name:      name,
		Holder:    st.rec.Holder,
		Token:     st.rec.Token,
		Acquired:  time.UnixMilli(st.rec.AcquiredMs),
		Released:  st.released,
		StepDown:  st.rec.StepDown,
		Successor: st.rec.Successor,
		Excluded:  st.rec.Excluded,
		Where:     st.rec.Where,
	}
	if st.rec.ReservedUntilMs != 0 {
		r.Reserved = time.UnixMilli(st.rec.ReservedUntilMs).Sub(now)
	}
	if st.held() {
		r.Remaining = left.remaining()
		r.Expires = now.Add(r.Remaining)
		r.Renewed = left.renewed(now)
	}
	return r
}

// readName reads name's keys, with its candidates when asked, in one
// linearizable request, and returns them with the revision they were read
// at; the handle remembers them (see seen).
func (s *Store) readName(ctx context.Context, k nameKeys, withCandidates bool) (nameState, int64, error) {
	resp, err := s.client.Txn(ctx).Then(readOps(k, withCandidates)...).Commit()
	if err != nil {
		return nameState{}, 0, err
	}
	st, err := s.learn(k, resp.Header.Revision, resp.Responses...)
	return st, resp.Header.Revision, err
}

// learn parses name's keys from the range responses of a transaction
// answered at rev (readOps's, in their order), and the handle remembers
// them (see seen).
func (s *Store) learn(k nameKeys, rev int64, ranges ...*etcdserverpb.ResponseOp) (nameState, error) {
	lists := make([][]*mvccpb.KeyValue, len(ranges))
	for i, r := range ranges {
		lists[i] = r.GetResponseRange().Kvs
	}
	st, err := parseName(k, lists...)
	if err == nil {
		s.seen.read(k.name, st, rev)
	}
	return st, err
}

// readOps read name's keys, with its candidates when asked.
func readOps(k nameKeys, withCandidates bool) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpGet(k.base, clientv3.WithPrefix())}
	if withCandidates {
		ops = append(ops, clientv3.OpGet(k.candidates, clientv3.WithPrefix()), clientv3.OpGet(k.attrs, clientv3.WithPrefix()))
	}
	return ops
}
