package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Wait blocks until name's tenure may differ from seen (lease.SameTenure),
// until timeout has passed, or until ctx ends. It returns nil in the first
// two cases, ctx's error in the third, and lease.ErrClosed once the Store
// is closed.
//
// It subscribes to the version poller, reads the row and its version, and
// returns at once if the row differs from seen. Otherwise, when the row
// shows a held tenure, it blocks on that tenure's wake-up lock in
// GET_LOCK on a session of its own (see locker): the holder's release, or
// its session's death, wakes it within a round trip; a waiter that gets
// the lock releases it at once. At the same time the poller compares the
// row's version with the one read, 250 ms after the read and then every
// 2 s (lockPollInterval), for the changes the lock does not signal (a
// step-down request, a takeover after expiry, an Annotate that pulsed the
// lock before this Wait blocked on it). Without a held tenure to block on (the name is free, the
// holder's lock session is broken), or when this store already has
// maxLockWaiters sessions blocked, the poller alone wakes it, every 250 ms
// (pollInterval). A read that fails is retried every pollInterval.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return s.waitFor(ctx, false, name, timeout, func(ctx context.Context) (bool, int64, string, error) {
		cur, version, err := s.readLease(ctx, name)
		if errors.Is(err, lease.ErrNotFound) {
			cur, version, err = lease.Record{}, absent, nil
		}
		if err != nil || !lease.SameTenure(cur, seen) {
			return err == nil, version, "", err
		}
		lock := ""
		if cur.Held() {
			lock = tenureLock(s.dbName, name, cur.Token)
		}
		return false, version, lock, nil
	})
}

// WaitGroup is Wait for a whole group: it compares with lease.SameGroup and
// is woken by the poller alone, which reads the group's version every
// 250 ms while it waits. Joins that add a member, Leaves, and every change
// of a partition's tenure raise that version.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) error {
	return s.waitFor(ctx, true, group, timeout, func(ctx context.Context) (bool, int64, string, error) {
		if err := s.checkOpen(); err != nil {
			return false, 0, "", err
		}
		cur, version, err := readGroup(ctx, s.auto(), group)
		if errors.Is(err, lease.ErrNotFound) {
			cur, version, err = lease.Group{}, absent, nil
		}
		return err == nil && !lease.SameGroup(cur, seen), version, "", err
	})
}

// waitFor waits for key's version to move, or for a lock to be released.
// read reads the current state: whether it differs from what the caller
// saw, its version, and the named lock to block on ("" for none).
func (s *Store) waitFor(ctx context.Context, group bool, key string, timeout time.Duration,
	read func(context.Context) (moved bool, version int64, lock string, err error)) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	sub := s.poller.subscribe(group, key)
	defer s.poller.unsubscribe(sub)

	var (
		lw       *lockWait
		lockDone <-chan lockResult
		retry    <-chan time.Time
		version  int64
		useLock  = true
		reread   = true
	)
	defer func() {
		if lw != nil {
			s.stopLockWait(lw)
		}
	}()
	for {
		if reread {
			reread, retry = false, nil
			rctx, cancel := context.WithDeadline(ctx, deadline)
			moved, v, lock, err := read(rctx)
			cancel()
			switch {
			case errors.Is(err, lease.ErrClosed):
				return lease.ErrClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				retry = time.After(pollInterval)
			case moved:
				return nil
			default:
				version = v
				every := pollInterval
				if lock != "" && useLock && lw == nil {
					if lw = s.startLockWait(lock, time.Until(deadline)); lw != nil {
						lockDone, every = lw.done, lockPollInterval
					}
				}
				s.poller.arm(sub, version, pollInterval, every)
			}
		}
		select {
		case <-sub.wake:
			return nil
		case r := <-lockDone:
			lw, lockDone = nil, nil
			switch r {
			case lockWoken:
				return nil
			case lockFree:
				// Released, or the holder's session is gone: look again at
				// once, then poll.
				useLock, reread = false, true
			default:
				// Timed out on the server (the timer decides) or failed.
				useLock = false
				s.poller.arm(sub, version, pollInterval, pollInterval)
			}
		case <-retry:
			reread = true
		case <-timer.C:
			if lw != nil {
				// Its GET_LOCK times out on the server now, too: let it
				// end by itself and keep its session.
				lw = nil
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return lease.ErrClosed
		}
	}
}

// lockResult is how a session blocked on a tenure's lock ended.
type lockResult int

const (
	lockWoken    lockResult = iota // got the lock (and released it): released, or the holder's session died
	lockFree                       // nobody held the lock: nothing to block on
	lockTimedOut                   // GET_LOCK timed out
	lockFailed                     // the session failed or was interrupted
)

// lockWait is one session blocked in GET_LOCK for a Wait.
type lockWait struct {
	done   chan lockResult // receives the one result
	cancel context.CancelFunc
	connID atomic.Int64 // the session's CONNECTION_ID() once it blocks
}

// lockWaitSlack is how much longer than GET_LOCK's own timeout its session
// may take before the store gives up on it.
const lockWaitSlack = 5 * time.Second

// startLockWait blocks a session of waitDB on key for up to d, or returns
// nil when maxLockWaiters sessions are blocked already or d is not
// positive (GET_LOCK would take a negative timeout for ever).
func (s *Store) startLockWait(key string, d time.Duration) *lockWait {
	if d <= 0 {
		return nil
	}
	select {
	case s.waitSlots <- struct{}{}:
	default:
		return nil
	}
	ctx, cancel := context.WithTimeout(s.life, d+lockWaitSlack)
	lw := &lockWait{done: make(chan lockResult, 1), cancel: cancel}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		cancel()
		<-s.waitSlots
		return nil
	}
	s.waits[lw] = struct{}{} // for Close to interrupt
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		lw.done <- lw.run(ctx, s.waitDB, key, d)
		cancel()
		s.mu.Lock()
		delete(s.waits, lw)
		s.mu.Unlock()
		<-s.waitSlots
	}()
	return lw
}

// run is the blocked session: it checks that someone holds key, blocks in
// GET_LOCK(key, d), and releases the lock at once if it got it.
func (lw *lockWait) run(ctx context.Context, db *sql.DB, key string, d time.Duration) lockResult {
	conn, err := db.Conn(ctx)
	if err != nil {
		return lockFailed
	}
	var (
		id   int64
		used sql.NullInt64
	)
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), IS_USED_LOCK(?)", key).Scan(&id, &used); err != nil {
		discard(conn)
		return lockFailed
	}
	if !used.Valid {
		conn.Close()
		return lockFree
	}
	lw.connID.Store(id)
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, d.Seconds()).Scan(&got)
	switch {
	case err != nil || !got.Valid:
		discard(conn)
		return lockFailed
	case got.Int64 == 0:
		conn.Close()
		return lockTimedOut
	}
	if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", key); err != nil {
		discard(conn) // ending the session releases the lock
	} else {
		conn.Close()
	}
	return lockWoken
}

// stopLockWait interrupts a blocked session whose Wait ended otherwise:
// the driver drops the connection, and KILL QUERY ends the server's side
// of it, which would otherwise wait out GET_LOCK's timeout.
func (s *Store) stopLockWait(lw *lockWait) {
	lw.cancel()
	if id := lw.connID.Load(); id != 0 {
		s.goroutine(func(context.Context) { s.killQueries([]int64{id}) })
	}
}

// killQueries interrupts the statements of the sessions ids (their own
// user's sessions, which needs no privilege), best effort.
func (s *Store) killQueries(ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), lockOpTimeout)
	defer cancel()
	for _, id := range ids {
		s.db.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id))
	}
}
