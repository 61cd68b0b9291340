// Package leasetest holds the conformance suite every lease.Store must pass,
// and an in-memory Store for tests of code built on package lease.
package leasetest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Memory is a lease.Store kept in process memory, using time.Now as the
// store's clock (so it follows a synctest bubble's fake time). The zero
// value is ready to use. Handle returns further handles on the same
// records, each with its own Close, as separate processes sharing a store
// would have.
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
	candidates map[string]map[string]time.Time // name → holder → seen until
	groups     map[string]*memGroup
	changed    map[string]chan struct{} // per name or group: closed and replaced on a change
	fail       error
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

// SetFailure makes every subsequent call of every handle fail with err (nil
// restores).
func (m *Memory) SetFailure(err error) {
	d := m.data()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = err
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
	now := time.Now()
	row := d.rows[name]
	if row != nil {
		cur := row.view(now)
		blocks := cur.Blocks(holder)
		if dead != nil && !cur.Released && cur.Holder == dead.Holder && cur.Token == dead.Token {
			// The tenure is proved dead: only a reservation keeps holder out.
			blocks = 0
			if cur.Reserved > 0 {
				blocks = lease.Record{Reserved: cur.Reserved, Successor: cur.Successor, Excluded: cur.Excluded}.Blocks(holder)
			}
		}
		if blocks > 0 {
			d.seeLocked(name, holder, now.Add(2*ttl))
			cur.Remaining = blocks
			return lease.Record{}, &lease.HeldError{Record: cur}
		}
	}
	token := now.UnixMilli()
	if row != nil {
		token = max(row.rec.Token+1, token)
	}
	if d.rows == nil {
		d.rows = make(map[string]*memRow)
	}
	row = &memRow{rec: lease.Record{Name: name, Holder: holder, Token: token, Acquired: now, Renewed: now}, expires: now.Add(ttl)}
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
	now := time.Now()
	row := d.rows[name]
	if !row.heldBy(holder, token, now) {
		return lease.Record{}, lease.ErrLost
	}
	row.rec.Renewed = now
	row.expires = now.Add(ttl)
	return row.view(now), nil
}

func (m *Memory) Annotate(ctx context.Context, name, holder string, token int64, where string) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	row := d.rows[name]
	if !row.heldBy(holder, token, time.Now()) {
		return lease.ErrLost
	}
	row.rec.Where = where
	d.wakeLocked(name)
	return nil
}

func (m *Memory) Release(ctx context.Context, name, holder string, token int64) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	row := d.rows[name]
	if !row.heldBy(holder, token, time.Now()) {
		return lease.ErrLost
	}
	row.rec.Released = true
	d.wakeLocked(name)
	return nil
}

func (m *Memory) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return lease.Record{}, err
	}
	defer d.mu.Unlock()
	now := time.Now()
	row := d.rows[name]
	if row == nil {
		return lease.Record{}, lease.StepDownRefusal(lease.Record{}, false, successor)
	}
	cur := row.view(now)
	if !cur.Held() || successor == cur.Holder || (successor != "" && !d.liveSuccessorLocked(name, successor, now)) {
		return lease.Record{}, lease.StepDownRefusal(cur, true, successor)
	}
	row.rec.StepDown = true
	row.rec.Successor, row.rec.Excluded = successor, ""
	if successor == "" {
		row.rec.Excluded = row.rec.Holder
	}
	row.reserved = now.Add(window)
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
	return row.view(time.Now()), nil
}

func (m *Memory) List(ctx context.Context) ([]lease.Record, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := time.Now()
	var recs []lease.Record
	for _, row := range d.rows {
		recs = append(recs, row.view(now))
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

func (m *Memory) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return m.wait(ctx, name, timeout, func(d *memData) bool {
		cur := lease.Record{}
		if row := d.rows[name]; row != nil {
			cur = row.view(time.Now())
		}
		return !lease.SameTenure(cur, seen)
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
		if d.groups == nil {
			d.groups = make(map[string]*memGroup)
		}
		g = &memGroup{partitions: partitions, members: make(map[string]time.Time)}
		d.groups[group] = g
	}
	if g.partitions != partitions {
		return lease.Group{}, &lease.PartitionsError{Group: group, Have: g.partitions, Want: partitions}
	}
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
	now := time.Now()
	for _, c := range claims {
		if row := d.rows[lease.PartitionKey(group, c.Partition)]; row.heldBy(member, c.Token, now) {
			row.rec.Renewed = now
			row.expires = now.Add(ttl)
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
	now := time.Now()
	if exp, ok := g.members[member]; !ok || !now.Before(exp) {
		d.wakeLocked(group)
	}
	g.members[member] = now.Add(ttl)
}

// groupLocked returns the view of an existing group.
func (d *memData) groupLocked(group string) lease.Group {
	now := time.Now()
	g := d.groups[group]
	out := lease.Group{Name: group, Partitions: g.partitions, Leases: make([]lease.Record, g.partitions)}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		if exp := g.members[id]; now.Before(exp) {
			out.Members = append(out.Members, lease.Member{Identity: id, Remaining: exp.Sub(now)})
		}
	}
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
	if now.Before(d.candidates[name][successor]) {
		return true
	}
	group, _, ok := lease.SplitPartitionKey(name)
	if !ok || d.groups[group] == nil {
		return false
	}
	return now.Before(d.groups[group].members[successor])
}

func (d *memData) seeLocked(name, holder string, until time.Time) {
	if d.candidates == nil {
		d.candidates = make(map[string]map[string]time.Time)
	}
	if d.candidates[name] == nil {
		d.candidates[name] = make(map[string]time.Time)
	}
	d.candidates[name][holder] = until
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

func (r *memRow) heldBy(holder string, token int64, now time.Time) bool {
	return r != nil && !r.rec.Released && r.rec.Holder == holder && r.rec.Token == token && now.Before(r.expires)
}

func (r *memRow) view(now time.Time) lease.Record {
	rec := r.rec
	rec.Expires = r.expires
	rec.Remaining = r.expires.Sub(now)
	if !r.reserved.IsZero() {
		rec.Reserved = r.reserved.Sub(now)
	}
	return rec
}
