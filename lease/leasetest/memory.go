// Package leasetest holds the conformance suite every lease.Store must pass,
// and an in-memory Store for tests of code built on package lease.
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
// store's clock (so it follows a synctest bubble's fake time). The zero
// value is ready to use. Fail, when set, makes every call return its error.
type Memory struct {
	mu         sync.Mutex // guards everything below
	rows       map[string]*memRow
	candidates map[string]map[string]time.Time // name → holder → seen until
	changed    map[string]chan struct{}        // closed and replaced when a name changes hands
	fail       error
}

var _ lease.Store = (*Memory)(nil)

type memRow struct {
	rec      lease.Record
	expires  time.Time
	reserved time.Time // end of the step-down reservation; zero for none
}

// SetFailure makes every subsequent call fail with err (nil restores).
func (m *Memory) SetFailure(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// Delete removes name's record, as an operator might.
func (m *Memory) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, name)
	m.wakeLocked(name)
}

func (m *Memory) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return lease.Record{}, err
	}
	now := time.Now()
	row := m.rows[name]
	if row != nil {
		if cur := row.view(now); cur.Blocks(holder) > 0 {
			cur.Remaining = cur.Blocks(holder)
			m.seeLocked(name, holder, now.Add(2*ttl))
			return lease.Record{}, &lease.HeldError{Record: cur}
		}
	}
	token := now.UnixMilli()
	if row != nil {
		token = max(row.rec.Token+1, token)
	}
	if m.rows == nil {
		m.rows = make(map[string]*memRow)
	}
	row = &memRow{rec: lease.Record{Name: name, Holder: holder, Token: token, Acquired: now, Renewed: now}, expires: now.Add(ttl)}
	m.rows[name] = row
	m.wakeLocked(name)
	return row.view(now), nil
}

func (m *Memory) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return lease.Record{}, err
	}
	now := time.Now()
	row := m.rows[name]
	if !row.heldBy(holder, token, now) {
		return lease.Record{}, lease.ErrLost
	}
	row.rec.Renewed = now
	row.expires = now.Add(ttl)
	return row.view(now), nil
}

func (m *Memory) Release(ctx context.Context, name, holder string, token int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return err
	}
	row := m.rows[name]
	if !row.heldBy(holder, token, time.Now()) {
		return lease.ErrLost
	}
	row.rec.Released = true
	m.wakeLocked(name)
	return nil
}

func (m *Memory) RequestStepDown(ctx context.Context, name, successor string, window time.Duration) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return lease.Record{}, err
	}
	now := time.Now()
	row := m.rows[name]
	switch {
	case row == nil:
		return lease.Record{}, lease.ErrNotFound
	case row.rec.Released || !now.Before(row.expires):
		return lease.Record{}, lease.ErrNotHeld
	case successor != "" && successor == row.rec.Holder:
		return lease.Record{}, lease.ErrAlreadyLeader
	case successor != "" && !now.Before(m.candidates[name][successor]):
		return lease.Record{}, lease.ErrUnknownSuccessor
	}
	row.rec.StepDown = true
	row.rec.Successor, row.rec.Excluded = successor, ""
	if successor == "" {
		row.rec.Excluded = row.rec.Holder
	}
	row.reserved = now.Add(window)
	m.wakeLocked(name)
	return row.view(now), nil
}

func (m *Memory) Get(ctx context.Context, name string) (lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return lease.Record{}, err
	}
	row := m.rows[name]
	if row == nil {
		return lease.Record{}, lease.ErrNotFound
	}
	return row.view(time.Now()), nil
}

func (m *Memory) List(ctx context.Context) ([]lease.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	var recs []lease.Record
	for _, row := range m.rows {
		recs = append(recs, row.view(now))
	}
	slices.SortFunc(recs, func(a, b lease.Record) int { return strings.Compare(a.Name, b.Name) })
	return recs, nil
}

func (m *Memory) Wait(ctx context.Context, name string, timeout time.Duration) error {
	m.mu.Lock()
	if m.changed == nil {
		m.changed = make(map[string]chan struct{})
	}
	ch := m.changed[name]
	if ch == nil {
		ch = make(chan struct{})
		m.changed[name] = ch
	}
	m.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Memory) Describe() string { return "memory" }
func (m *Memory) Close() error     { return nil }

func (m *Memory) check(ctx context.Context) error {
	if m.fail != nil {
		return m.fail
	}
	return ctx.Err()
}

func (m *Memory) seeLocked(name, holder string, until time.Time) {
	if m.candidates == nil {
		m.candidates = make(map[string]map[string]time.Time)
	}
	if m.candidates[name] == nil {
		m.candidates[name] = make(map[string]time.Time)
	}
	m.candidates[name][holder] = until
}

func (m *Memory) wakeLocked(name string) {
	if ch := m.changed[name]; ch != nil {
		close(ch)
		delete(m.changed, name)
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
