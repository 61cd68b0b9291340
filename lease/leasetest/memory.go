// Package leasetest holds the conformance suite every lease.Store must pass
// (Run), the model-based test that checks a store against the lease rules
// (RunModel), and an in-memory Store for tests of code built on package
// lease.
package leasetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Memory is a lease.Store kept in process memory, using time.Now as the
// store's clock (so it follows a synctest bubble's fake time) unless
// SetClock gives it another. The zero value is ready to use. Handle
// returns further handles on the same records, each with its own Close,
// as separate processes sharing a store would have. It applies the lease
// rules of package lease (lease.Grant and the others) to its records.
type Memory struct {
	once sync.Once
	d    *memData // shared by handles; set by data

	closeOnce sync.Once
	closed    chan struct{} // closed by Close; set by data
}

// memData is what handles of one Memory share.
type memData struct {
	mu         sync.Mutex // guards everything below
	rows       map[string]*memRow
	candidates map[string]map[string]lease.Candidate // name → holder → candidate
	groups     map[string]*memGroup
	changed    map[string]chan struct{} // per name or group: closed and replaced on a change
	fail       error
	clock      func() time.Time // the store's clock; nil: time.Now
}

type memRow struct {
	rec      lease.Record
	expires  time.Time
	reserved time.Time // end of the step-down reservation; zero for none
}

type memGroup struct {
	partitions int
	members    map[string]time.Time // identity → expiry
}

var _ lease.Store = (*Memory)(nil)

func (m *Memory) data() *memData {
	m.once.Do(func() {
		if m.d == nil {
			m.d = &memData{}
		}
		m.closed = make(chan struct{})
	})
	return m.d
}

// Handle returns another handle on m's records.
func (m *Memory) Handle() *Memory {
	return &Memory{d: m.data()}
}

// SetClock makes now the store's clock, for every handle.
func (m *Memory) SetClock(now func() time.Time) {
	d := m.data()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clock = now
}

// now reads the store's clock; d.mu is held.
func (d *memData) now() time.Time {
	if d.clock != nil {
		return d.clock()
	}
	return time.Now()
}

// SetFailure makes every subsequent call of every handle fail with err (nil
// restores).
func (m *Memory) SetFailure(err error) {
	d := m.data()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = err
}

// Put writes rec as its name's record, expiring at rec.Expires (its
// Remaining and Reserved aside), as an operator or a restore from backup
// might.
func (m *Memory) Put(rec lease.Record) {
	d := m.data()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rows == nil {
		d.rows = make(map[string]*memRow)
	}
	expires := rec.Expires
	rec.Expires, rec.Remaining, rec.Reserved = time.Time{}, 0, 0
	d.rows[rec.Name] = &memRow{rec: rec, expires: expires}
	d.wakeLocked(rec.Name)
}

// Delete removes name's record, as an operator might.
func (m *Memory) Delete(name string) {
	d := m.data()
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.rows, name)
	d.wakeLocked(name)
}

// lock locks the shared data and checks for a failure, a closed handle and
// ctx; on error it has unlocked again.
func (m *Memory) lock(ctx context.Context) (*memData, error) {
	d := m.data()
	d.mu.Lock()
	var err error
	select {
	case <-m.closed:
		err = lease.ErrClosed
	default:
		switch {
		case d.fail != nil:
			err = d.fail
		case ctx.Err() != nil:
			err = ctx.Err()
		}
	}
	if err != nil {
		d.mu.Unlock()
		return nil, err
	}
	return d, nil
}

func (m *Memory) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	return m.grant(ctx, name, holder, nil, ttl)
}

func (m *Memory) Seize(ctx context.Context, name, holder string, dead lease.Record, ttl time.Duration) (lease.Record, error) {
	return m.grant(ctx, name, holder, &dead, ttl)
}

// grant is Acquire, or Seize from dead when dead is not nil.
func (m *Memory) grant(ctx context.Context, name, holder string, dead *lease.Record, ttl time.Duration) (lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	defer d.mu.Unlock()
	now := d.now()
	granted, err := lease.Grant(d.rows[name].view(now), name, holder, dead, ttl, now)
	if err != nil {
		seen := lease.Seen(holder, ttl, now)
		if prev, ok := d.candidates[name][holder]; ok {
			seen = lease.SeeAgain(prev, ttl, now)
		}
		d.seeLocked(name, seen)
		return lease.Record{}, err
	}
	if d.rows == nil {
		d.rows = make(map[string]*memRow)
	}
	row := &memRow{}
	row.set(granted, now)
	d.rows[name] = row
	d.wakeLocked(name)
	return row.view(now), nil
}

func (m *Memory) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	defer d.mu.Unlock()
	now := d.now()
	row := d.rows[name]
	renewed, err := lease.Renew(row.view(now), holder, token, ttl, now)
	if err != nil {
		return lease.Record{}, err
	}
	row.set(renewed, now)
	return row.view(now), nil
}

func (m *Memory) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	now := d.now()
	row := d.rows[name]
	annotated, err := lease.Annotate(row.view(now), holder, token, where)
	if err != nil {
		return err
	}
	row.set(annotated, now)
	d.wakeLocked(name)
	return nil
}

func (m *Memory) Release(ctx context.Context, name, holder string, token int64) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	now := d.now()
	row := d.rows[name]
	released, err := lease.Release(row.view(now), holder, token)
	if err != nil {
		return err
	}
	row.set(released, now)
	d.wakeLocked(name)
	return nil
}

func (m *Memory) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	defer d.mu.Unlock()
	now := d.now()
	row := d.rows[name]
	asked, err := lease.StepDown(row.view(now), successor, window, func() bool {
		return d.liveSuccessorLocked(name, successor, now)
	})
	if err != nil {
		return lease.Record{}, err
	}
	row.set(asked, now)
	d.wakeLocked(name)
	return row.view(now), nil
}

func (m *Memory) Get(ctx context.Context, name string) (lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	defer d.mu.Unlock()
	row := d.rows[name]
	if row == nil {
		return lease.Record{}, lease.ErrNotFound
	}
	return row.view(d.now()), nil
}

func (m *Memory) List(ctx context.Context) ([]lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := d.now()
	var recs []lease.Record
	for _, row := range d.rows {
		recs = append(recs, row.view(now))
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

func (m *Memory) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return m.wait(ctx, name, timeout, func(d *memData) bool {
		return !lease.SameTenure(d.rows[name].view(d.now()), seen)
	})
}

func (m *Memory) Join(ctx context.Context, group string, partitions int, member string, ttl time.Duration) (lease.Group, error) {
	if err := lease.CheckJoin(group, partitions, member); err != nil {
		return lease.Group{}, err
	}
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Group{}, err
	}
	defer d.mu.Unlock()
	g := d.groups[group]
	if g == nil {
		g = &memGroup{members: make(map[string]time.Time)}
	}
	n, err := lease.JoinPartitions(group, g.partitions, partitions)
	if err != nil {
		return lease.Group{}, err
	}
	if d.groups == nil {
		d.groups = make(map[string]*memGroup)
	}
	g.partitions, d.groups[group] = n, g
	d.keepMemberLocked(group, g, member, ttl)
	return d.groupLocked(group), nil
}

func (m *Memory) RenewMember(ctx context.Context, group, member string, claims []lease.Claim, ttl time.Duration) (lease.Group, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Group{}, err
	}
	defer d.mu.Unlock()
	g := d.groups[group]
	if g == nil {
		return lease.Group{}, lease.ErrNotFound
	}
	d.keepMemberLocked(group, g, member, ttl)
	now := d.now()
	for _, c := range claims {
		row := d.rows[lease.PartitionKey(group, c.Partition)]
		if renewed, err := lease.Renew(row.view(now), member, c.Token, ttl, now); err == nil {
			row.set(renewed, now)
		}
	}
	return d.groupLocked(group), nil
}

func (m *Memory) Leave(ctx context.Context, group, member string) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if g := d.groups[group]; g != nil {
		if _, ok := g.members[member]; ok {
			delete(g.members, member)
			d.wakeLocked(group)
		}
	}
	return nil
}

func (m *Memory) GetGroup(ctx context.Context, group string) (lease.Group, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Group{}, err
	}
	defer d.mu.Unlock()
	if d.groups[group] == nil {
		return lease.Group{}, lease.ErrNotFound
	}
	return d.groupLocked(group), nil
}

func (m *Memory) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	var changed lease.Group
	err := m.wait(ctx, group, timeout, func(d *memData) bool {
		cur := lease.Group{}
		if d.groups[group] != nil {
			cur = d.groupLocked(group)
		}
		if lease.SameGroup(cur, seen) {
			return false
		}
		changed = cur
		return true
	})
	return changed, err
}

// wait returns when changed reports a change, at timeout, or when ctx ends
// or the handle is closed. It checks changed on every wake-up of key and
// once at the start, with the wake-up channel already taken.
func (m *Memory) wait(ctx context.Context, key string, timeout time.Duration, changed func(*memData) bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		d, err := m.lock(ctx)
		if err != nil {
			return err
		}
		ch := d.changedLocked(key)
		moved := changed(d)
		d.mu.Unlock()
		if moved {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-m.closed:
			return lease.ErrClosed
		}
	}
}

func (m *Memory) Describe() string { return "memory" }

// Close closes this handle: its calls fail with lease.ErrClosed and its
// Waits end. Other handles go on.
func (m *Memory) Close() error {
	m.data()
	m.closeOnce.Do(func() { close(m.closed) })
	return nil
}

func (d *memData) keepMemberLocked(group string, g *memGroup, member string, ttl time.Duration) {
	until, added := lease.KeepMember(g.members[member], ttl, d.now())
	if added {
		d.wakeLocked(group)
	}
	g.members[member] = until
}

// groupLocked returns the view of an existing group.
func (d *memData) groupLocked(group string) lease.Group {
	now := d.now()
	g := d.groups[group]
	out := lease.Group{Name: group, Partitions: g.partitions, Leases: make([]lease.Record, g.partitions),
		Members: lease.LiveMembers(g.members, now)}
	for p := range out.Leases {
		key := lease.PartitionKey(group, p)
		if row := d.rows[key]; row != nil {
			out.Leases[p] = row.view(now)
		} else {
			out.Leases[p] = lease.Record{Name: key}
		}
	}
	return out
}

// liveSuccessorLocked reports whether successor is a live candidate for
// name or, when name is a partition, a live member of its group.
func (d *memData) liveSuccessorLocked(name, successor string, now time.Time) bool {
	var memberUntil time.Time
	if group, _, ok := lease.SplitPartitionKey(name); ok && d.groups[group] != nil {
		memberUntil = d.groups[group].members[successor]
	}
	return lease.LiveSuccessor(name, d.candidates[name][successor], memberUntil, now)
}

func (d *memData) seeLocked(name string, c lease.Candidate) {
	if d.candidates == nil {
		d.candidates = make(map[string]map[string]lease.Candidate)
	}
	if d.candidates[name] == nil {
		d.candidates[name] = make(map[string]lease.Candidate)
	}
	d.candidates[name][c.Holder] = c
}

func (d *memData) changedLocked(key string) chan struct{} {
	if d.changed == nil {
		d.changed = make(map[string]chan struct{})
	}
	ch := d.changed[key]
	if ch == nil {
		ch = make(chan struct{})
		d.changed[key] = ch
	}
	return ch
}

// wakeLocked wakes the waiters of name and, for a partition, of its group.
func (d *memData) wakeLocked(name string) {
	keys := []string{name}
	if group, _, ok := lease.SplitPartitionKey(name); ok {
		keys = append(keys, group)
	}
	for _, k := range keys {
		if ch := d.changed[k]; ch != nil {
			close(ch)
			delete(d.changed, k)
		}
	}
}

// set makes rec, a record measured at now that a rule returned, the row.
func (r *memRow) set(rec lease.Record, now time.Time) {
	r.expires, r.reserved = rec.Expires, time.Time{}
	if rec.Successor != "" || rec.Excluded != "" {
		r.reserved = now.Add(rec.Reserved)
	}
	rec.Expires, rec.Remaining, rec.Reserved = time.Time{}, 0, 0
	r.rec = rec
}

// view is the row measured at now; the zero Record for no row.
func (r *memRow) view(now time.Time) lease.Record {
	if r == nil {
		return lease.Record{}
	}
	rec := r.rec
	rec.Expires = r.expires
	rec.Remaining = r.expires.Sub(now)
	if !r.reserved.IsZero() {
		rec.Reserved = r.reserved.Sub(now)
	}
	return rec
}
