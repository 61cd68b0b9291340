package mysql

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Poll cadences of the version poller.
const (
	// pollInterval is how often the versions of names and groups are
	// read while a Wait or WaitGroup has no lock to block on.
	pollInterval = 250 * time.Millisecond
	// lockPollInterval is how often they are read for a Wait that blocks
	// on a tenure's lock, which signals releases and the holder's death
	// but not a step-down request or a takeover after expiry. Its first
	// read comes after pollInterval, for a change that landed between the
	// Wait's read and its GET_LOCK, where the lock cannot show it (an
	// Annotate's release and retake of the lock).
	lockPollInterval = 2 * time.Second
	// pollTimeout bounds one poll.
	pollTimeout = 5 * time.Second
)

// poller reads the version of every waited name and group in one indexed
// statement, at most every pollInterval and only while someone waits, and
// wakes the waiters whose version moved. Every change a waiter must see
// (acquire, release, step-down, annotate; for a group also a member joining,
// coming back or leaving, and any change of a partition's tenure) raises
// the version in the same transaction; renewals do not. MySQL has no
// notification a client can wait on for many keys at once, and a session
// blocked in GET_LOCK waits for one key only; this poll is the one wake-up
// path that covers every change, with a bounded delay and a cost that does
// not grow with the number of waiters.
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
	// the key's version with version every interval from next on.
	armed   bool
	version int64
	every   time.Duration
	next    time.Time
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

// absent is the version of a row that does not exist. (A row an older
// version wrote before the column existed has version 0.)
const absent = -1

// arm makes the poller wake sub once its key's version differs from
// version (absent: the row does not exist), checking after first and then
// every interval.
func (p *poller) arm(sub *subscription, version int64, first, every time.Duration) {
	p.mu.Lock()
	sub.armed, sub.version, sub.every, sub.next = true, version, every, time.Now().Add(first)
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

// poll reads the versions of due's keys in one statement and wakes the
// subscriptions whose version moved.
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
		parts = append(parts, "SELECT 0, name, version FROM `"+leasesTable+"` WHERE name IN ("+placeholders(len(names))+")")
	}
	if len(groups) > 0 {
		parts = append(parts, "SELECT 1, name, version FROM `"+groupsTable+"` WHERE name IN ("+placeholders(len(groups))+")")
	}
	versions, err := p.read(ctx, strings.Join(parts, " UNION ALL "), append(names, groups...))
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sub := range due {
		if _, ok := p.subs[sub]; !ok || !sub.armed {
			continue
		}
		v, ok := versions[subscriptionKey{sub.group, sub.key}]
		if !ok {
			v = absent
		}
		if err == nil && v != sub.version {
			sub.armed = false
			select {
			case sub.wake <- struct{}{}:
			default:
			}
			continue
		}
		sub.next = now.Add(sub.every)
	}
}

type subscriptionKey struct {
	group bool
	key   string
}

func (p *poller) read(ctx context.Context, q string, args []any) (map[subscriptionKey]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	rows, err := p.s.auto().query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	versions := map[subscriptionKey]int64{}
	for rows.Next() {
		var (
			group   bool
			key     string
			version int64
		)
		if err := rows.Scan(&group, &key, &version); err != nil {
			return nil, err
		}
		versions[subscriptionKey{group, key}] = version
	}
	return versions, rows.Err()
}
