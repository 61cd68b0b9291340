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
// When seen is a held tenure, one statement on a session of its own reads
// the row and, if it still shows seen's tenure, blocks in GET_LOCK on that
// tenure's wake-up lock (see locker): the holder's release, its session's
// death, or an Annotate (which moves the tenure to another lock) wakes it
// within a round trip; a waiter that gets the lock releases it in the
// same statement. The holder's own Wait on its tenure (the wait for a
// step-down request) also holds the tenure's bell lock while it blocks,
// which RequestStepDown rings; the rung Wait then pulses the tenure's
// lock (releases and retakes it), so that the other waiters read the
// request too. What no lock signals, a takeover by another
// holder after the expiry while the old holder's session lives on, the
// poller checks at the tenure's expiry + expiryGrace, and every
// lockPollInterval while it stays expired; the holder's own Wait needs no
// poll, as this Store's lock session gives the lock up when a renewal or
// release finds the tenure lost.
//
// A Wait whose timeout passes while it blocks returns once its GET_LOCK,
// given the same deadline, has timed out on the server too (a round trip
// later; at most lockTimeoutLag), so that its session is back in the pool
// for the next Wait instead of another being opened.
//
// Otherwise (seen is not held, the holder's lock session is broken, or
// this store already has maxLockWaiters sessions blocked) it reads the row
// and the poller reads it every 250 ms (pollInterval). A read that fails
// is retried every pollInterval.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	if err := lease.IfClosed(s.closed); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	sub := s.poller.subscribe(false, name)
	defer s.poller.unsubscribe(sub)

	var (
		lw       *lockWait
		lockDone <-chan lockResult
		retry    <-chan time.Time
		reread   = true
		self     bool             // seen is this Store's own tenure
		lag      <-chan time.Time // set once the timeout passed while lw blocks
	)
	defer func() {
		if lw != nil {
			s.stopLockWait(lw)
		}
	}()
	if seen.Held() {
		self = s.locks.holds(name, seen.Token)
		if lw = s.startLockWait(name, seen, self, deadline); lw != nil {
			lockDone, reread = lw.done, false
			if !self {
				s.poller.armName(sub, seen, seen.Remaining+expiryGrace, lockPollInterval, true)
			}
		}
	}
	for {
		if reread {
			reread, retry = false, nil
			rctx, cancel := context.WithDeadline(ctx, deadline)
			cur, _, err := s.readLease(rctx, name)
			cancel()
			if errors.Is(err, lease.ErrNotFound) {
				cur, err = lease.Record{}, nil
			}
			switch {
			case errors.Is(err, lease.ErrClosed):
				return lease.ErrClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				retry = time.After(pollInterval)
			case !lease.SameTenure(cur, seen):
				return nil
			default:
				s.poller.armName(sub, seen, pollInterval, pollInterval, false)
			}
		}
		select {
		case <-sub.wake:
			return nil
		case r := <-lockDone:
			lw, lockDone = nil, nil
			if lease.IfClosed(s.closed) != nil {
				return lease.ErrClosed // Close interrupted it
			}
			switch {
			case r == lockRung:
				if self {
					// A step-down request: wake the tenure's other
					// waiters too, which the request could not reach.
					s.goroutine(func(context.Context) { s.locks.pulse(name, seen.Token) })
				}
				return nil
			case r == lockMoved, r == lockWoken, lag != nil:
				return nil
			case r == lockTimedOut:
				// Timed out on the server, perhaps a little before the
				// timer: poll until it fires.
				s.poller.armName(sub, seen, pollInterval, pollInterval, false)
			default:
				// Nobody holds the lock (the holder's session is broken),
				// or the session failed: read, then poll.
				reread = true
			}
		case <-retry:
			reread = true
		case <-timer.C:
			if lw == nil {
				return nil
			}
			// Its GET_LOCK times out on the server now, too: wait for
			// that, so that its session is free for the next Wait.
			lag = time.After(lockTimeoutLag)
		case <-lag:
			// The server is slow to end it: let it end by itself and
			// keep its session.
			lw = nil
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return lease.ErrClosed
		}
	}
}

// WaitGroup is Wait for a whole group: it compares with lease.SameGroup and
// is woken by the poller alone, which reads the group's version every
// 250 ms while it waits. Joins that add a member, Leaves, and every change
// of a partition's tenure raise that version.
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	if err := lease.IfClosed(s.closed); err != nil {
		return lease.Group{}, err
	}
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	sub := s.poller.subscribe(true, group)
	defer s.poller.unsubscribe(sub)
	var retry <-chan time.Time
	for reread := true; ; {
		if reread {
			reread, retry = false, nil
			rctx, cancel := context.WithDeadline(ctx, deadline)
			cur, version, err := readGroup(rctx, s.auto(), group)
			cancel()
			if errors.Is(err, lease.ErrNotFound) {
				cur, version, err = lease.Group{}, absent, nil
			}
			switch {
			case ctx.Err() != nil:
				return lease.Group{}, ctx.Err()
			case err != nil:
				retry = time.After(pollInterval)
			case !lease.SameGroup(cur, seen):
				return cur, nil
			default:
				s.poller.armGroup(sub, version, pollInterval, pollInterval)
			}
		}
		select {
		case <-sub.wake:
			return lease.Group{}, nil
		case <-retry:
			reread = true
		case <-timer.C:
			return lease.Group{}, nil
		case <-ctx.Done():
			return lease.Group{}, ctx.Err()
		case <-s.closed:
			return lease.Group{}, lease.ErrClosed
		}
	}
}

// lockResult is how a session blocked on a tenure's lock ended.
type lockResult int

const (
	lockWoken    lockResult = iota // got the lock (and released it)
	lockRung                       // interrupted: a step-down request rang the bell
	lockMoved                      // the row no longer showed the tenure: nothing to block on
	lockFree                       // nobody held the lock: nothing to block on
	lockTimedOut                   // GET_LOCK timed out
	lockFailed                     // the session failed
)

// lockWait is one session blocked in GET_LOCK for a Wait.
type lockWait struct {
	done   chan lockResult // receives the one result
	cancel context.CancelFunc
	connID atomic.Int64 // the session's CONNECTION_ID() once it blocks
}

// lockEarly is how much sooner than its timeout a GET_LOCK that returned 0
// must have ended to count as interrupted rather than timed out.
const lockEarly = 100 * time.Millisecond

// lockWaitSlack is how much longer than GET_LOCK's own timeout its session
// may take before the store gives up on it.
const lockWaitSlack = 5 * time.Second

// lockTimeoutLag bounds how long a Wait whose timeout passed waits for its
// GET_LOCK to time out on the server, which it does a round trip after
// the Wait's own timer (both end at the Wait's deadline).
const lockTimeoutLag = 100 * time.Millisecond

// startLockWait blocks a session of waitDB on the lock of seen's tenure of
// name until deadline (see lockWait.run), or returns nil when
// maxLockWaiters sessions are blocked already or deadline has passed.
// With self, the session also holds the tenure's bell lock while it
// blocks.
func (s *Store) startLockWait(name string, seen lease.Record, self bool, deadline time.Time) *lockWait {
	if !time.Now().Before(deadline) {
		return nil
	}
	select {
	case s.waitSlots <- struct{}{}:
	default:
		return nil
	}
	ctx, cancel := context.WithDeadline(s.life, deadline.Add(lockWaitSlack))
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
		bell := ""
		if self {
			bell = bellLock(s.dbName, name, seen.Token)
		}
		lw.done <- lw.run(ctx, s.waitDB, name, seen, tenureLock(s.dbName, name, seen.Token, seen.Where), bell, deadline)
		cancel()
		s.mu.Lock()
		delete(s.waits, lw)
		s.mu.Unlock()
		<-s.waitSlots
	}()
	return lw
}

// lockWaitSQL reads name's row and, if it still shows the tenure that the
// arguments describe, blocks in GET_LOCK on its lock and releases the lock
// at once if it got it: 1 woken, 0 timed out, -1 the row shows another
// tenure, -2 nobody holds the lock (the holder's session is broken, or an
// Annotate moved the tenure to another lock), NULL interrupted (MySQL; an
// interrupted GET_LOCK returns 0 on MariaDB, before its timeout).
var lockWaitSQL = "SELECT IF(holder = ? AND token = ? AND released = ? AND step_down = ? AND location = ?, " +
	"IF(IS_USED_LOCK(?) IS NULL, -2, IF(GET_LOCK(?, ?) = 1, RELEASE_LOCK(?), 0)), -1)%s " +
	"FROM `" + leasesTable + "` WHERE name = ?"

// run is the blocked session: one statement reads the row, checks that
// someone holds key, blocks in GET_LOCK(key, …) until deadline, and
// releases the lock if it got it. The timeout is measured when the
// statement is sent, so that the server ends it a round trip after
// deadline, not later by the time it took to get the session. With a
// bell, the session first takes it, and releases it in the same statement
// as it ends; a session interrupted while it holds the bell (a step-down
// request) releases it separately.
func (lw *lockWait) run(ctx context.Context, db *sql.DB, name string, seen lease.Record, key, bell string, deadline time.Time) lockResult {
	conn, err := db.Conn(ctx)
	if err != nil {
		return lockFailed
	}
	id := sessionID(conn)
	if id == 0 {
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			discard(conn)
			return lockFailed
		}
	}
	lw.connID.Store(id)
	if bell != "" {
		if _, err := conn.ExecContext(ctx, "DO GET_LOCK(?, 0)", bell); err != nil {
			discard(conn)
			return lockFailed
		}
	}
	start := time.Now()
	d := max(deadline.Sub(start), 0) // a negative timeout would wait for ever
	q, args := fmt.Sprintf(lockWaitSQL, ""), []any{seen.Holder, seen.Token, seen.Released, seen.StepDown, seen.Where, key, key, d.Seconds(), key, name}
	if bell != "" {
		q = fmt.Sprintf(lockWaitSQL, ", RELEASE_LOCK(?)")
		args = append(args[:len(args)-1:len(args)-1], bell, name)
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, q, args...).Scan(append([]any{&got}, bellDest(bell)...)...)
	early := time.Since(start) < d-lockEarly
	switch {
	case errors.Is(err, sql.ErrNoRows):
		lw.release(ctx, conn, bell)
		return lockMoved
	case err != nil && ctx.Err() == nil && serverError(err, erQueryInterrupted):
		lw.release(ctx, conn, bell)
		return lockRung
	case err != nil:
		discard(conn)
		return lockFailed
	case !got.Valid:
		lw.release(ctx, conn, bell)
		return lockRung
	}
	conn.Close()
	switch got.Int64 {
	case 1:
		return lockWoken
	case 0:
		if early {
			// MariaDB's GET_LOCK returns 0 when KILL QUERY interrupts it
			// (MySQL's, NULL): a step-down request rang the bell.
			return lockRung
		}
		return lockTimedOut
	case -1:
		return lockMoved
	}
	return lockFree
}

// bellDest scans the bell's RELEASE_LOCK, when there is a bell.
func bellDest(bell string) []any {
	if bell == "" {
		return nil
	}
	return []any{new(sql.NullInt64)}
}

// release gives up every named lock the session holds (a bell whose
// statement was interrupted, or that ended without reaching its
// RELEASE_LOCK) and returns it to its pool, or ends it.
func (lw *lockWait) release(ctx context.Context, conn *sql.Conn, bell string) {
	if bell == "" {
		conn.Close()
		return
	}
	if _, err := conn.ExecContext(ctx, "DO RELEASE_ALL_LOCKS()"); err != nil {
		discard(conn) // ending the session releases its locks
		return
	}
	conn.Close()
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
