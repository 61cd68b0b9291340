package mysql

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Poll cadences of the poller.
const (
	// pollInterval is how often names and groups are read while a Wait or
	// WaitGroup has no lock to block on.
	pollInterval = 250 * time.Millisecond
	// expiryGrace is how long after the expiry of the tenure a Wait blocks
	// on (its lock) the poller reads the name, for the one change the lock
	// cannot signal and that cannot come before the expiry: a takeover by
	// another holder while the old holder's session lives on. Until the
	// expiry, every change of hands wakes the lock (release, death of the
	// holder's session, Annotate) or the holder's own Wait (a step-down
	// request rings its bell).
	expiryGrace = 500 * time.Millisecond
	// lockPollInterval is how often the name is read after that, while
	// the tenure stays expired and unchanged.
	lockPollInterval = 2 * time.Second
	// pollTimeout bounds one poll.
	pollTimeout = 5 * time.Second
)

// poller reads the tenure of every waited name and the version of every
// waited group in one indexed statement, only while someone waits and only
// when a check is due, and wakes the waiters whose name or group moved.
// Every change a group's waiter must see (a member joining, coming back or
// leaving, any change of a partition's tenure) raises the group's version
// in the same transaction; a name's waiter compares the tenure itself
// (lease.SameTenure), which renewals do not change. MySQL has no
// notification a client can wait on for many keys at once, and a session
// blocked in GET_LOCK waits for one key only; this poll covers what the
// locks do not, with a bounded delay and a cost that does not grow with
// the number of waiters.
type poller struct {
	s *Store

	mu      sync.Mutex // guards the fields below and every subscription's poll state
	subs    map[*subscription]struct{}
	changed chan struct{} // has room for one signal: subs or their schedule changed
	started bool
}

// subscription is one Wait's interest in a name or a group.
type subscription struct {
	group bool
	key   string
	wake  chan struct{} // has room for one wake-up

	// Poll state, guarded by poller.mu: once armed, the poller compares
	// the name's tenure with seen (a group's version with version) at
	// next, and then every interval; with atExpiry, at the tenure's
	// expiry + expiryGrace instead, while it has not expired.
	armed    bool
	seen     lease.Record
	version  int64
	every    time.Duration
	atExpiry bool
	next     time.Time
}

func newPoller(s *Store) *poller {
	return &poller{s: s, subs: map[*subscription]struct{}{}, changed: make(chan struct{}, 1)}
}

func (p *poller) subscribe(group bool, key string) *subscription {
	sub := &subscription{group: group, key: key, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs[sub] = struct{}{}
	if !p.started {
		p.started = true
		p.s.goroutine(p.run)
	}
	return sub
}

func (p *poller) unsubscribe(sub *subscription) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.subs, sub)
}

// absent is the version of a group that does not exist.
const absent = -1

// armName makes the poller wake sub once name's tenure differs from seen
// (lease.SameTenure), checking after first and then every interval; with
// atExpiry, every check while the tenure has not expired is put off to its
// expiry + expiryGrace.
func (p *poller) armName(sub *subscription, seen lease.Record, first, every time.Duration, atExpiry bool) {
	p.arm(sub, func() { sub.seen, sub.atExpiry = seen, atExpiry }, first, every)
}

// armGroup makes the poller wake sub once the group's version differs from
// version (absent: no group), checking after first and then every interval.
func (p *poller) armGroup(sub *subscription, version int64, first, every time.Duration) {
	p.arm(sub, func() { sub.version = version }, first, every)
}

func (p *poller) arm(sub *subscription, set func(), first, every time.Duration) {
	p.mu.Lock()
	set()
	sub.armed, sub.every, sub.next = true, every, time.Now().Add(first)
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// run polls until the store closes.
func (p *poller) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := p.due(time.Now())
		if len(due) > 0 {
			p.poll(ctx, due)
			continue
		}
		var tick <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-p.changed:
		case <-tick:
		}
		timer.Stop()
	}
}

// due returns the armed subscriptions whose check is due at now, and the
// earliest check of the others.
func (p *poller) due(now time.Time) (due []*subscription, next time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sub := range p.subs {
		switch {
		case !sub.armed:
		case !sub.next.After(now):
			due = append(due, sub)
		case next.IsZero() || sub.next.Before(next):
			next = sub.next
		}
	}
	return due, next
}

// polled is what one poll read of a name or a group.
type polled struct {
	rec     lease.Record // a name's tenure; Remaining is the time to its expiry
	version int64        // a group's version
}

// poll reads due's names and groups in one statement and wakes the
// subscriptions whose name or group moved.
func (p *poller) poll(ctx context.Context, due []*subscription) {
	var names, groups []any
	seen := map[subscriptionKey]bool{}
	for _, sub := range due {
		k := subscriptionKey{sub.group, sub.key}
		if seen[k] {
			continue
		}
		seen[k] = true
		if sub.group {
			groups = append(groups, sub.key)
		} else {
			names = append(names, sub.key)
		}
	}
	var parts []string
	if len(names) > 0 {
		parts = append(parts, "SELECT 0, name, version, holder, token, released, step_down, location, "+
			"TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM `"+leasesTable+"` WHERE name IN ("+placeholders(len(names))+")")
	}
	if len(groups) > 0 {
		parts = append(parts, "SELECT 1, name, version, '', 0, FALSE, FALSE, '', 0 FROM `"+groupsTable+"` WHERE name IN ("+placeholders(len(groups))+")")
	}
	got, err := p.read(ctx, strings.Join(parts, " UNION ALL "), append(names, groups...))
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sub := range due {
		if _, ok := p.subs[sub]; !ok || !sub.armed {
			continue
		}
		if err != nil {
			sub.next = now.Add(sub.every)
			continue
		}
		cur, found := got[subscriptionKey{sub.group, sub.key}]
		var moved bool
		if sub.group {
			v := int64(absent)
			if found {
				v = cur.version
			}
			moved = v != sub.version
		} else {
			moved = !lease.SameTenure(cur.rec, sub.seen) // an absent name reads as the zero Record
		}
		if moved {
			sub.armed = false
			select {
			case sub.wake <- struct{}{}:
			default:
			}
			continue
		}
		next := sub.every
		if sub.atExpiry && cur.rec.Remaining > 0 {
			next = cur.rec.Remaining + expiryGrace
		}
		sub.next = now.Add(next)
	}
}

type subscriptionKey struct {
	group bool
	key   string
}

func (p *poller) read(ctx context.Context, q string, args []any) (map[subscriptionKey]polled, error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	rows, err := p.s.auto().query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[subscriptionKey]polled{}
	for rows.Next() {
		var (
			group       bool
			key         string
			v           polled
			remainingUS int64
		)
		if err := rows.Scan(&group, &key, &v.version, &v.rec.Holder, &v.rec.Token, &v.rec.Released,
			&v.rec.StepDown, &v.rec.Where, &remainingUS); err != nil {
			return nil, err
		}
		v.rec.Name = key
		v.rec.Remaining = time.Duration(remainingUS) * time.Microsecond
		out[subscriptionKey{group, key}] = v
	}
	return out, rows.Err()
}
