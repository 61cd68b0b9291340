package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// wakeLimit is how soon a waiter must wake when a lock wakes it: far less
// than the poll interval of a waiter on the lock path.
const wakeLimit = time.Second

// startWait runs s.Wait from seen in the background and reports when it
// returns.
func startWait(t *testing.T, s *Store, name string, seen lease.Record, timeout time.Duration) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Wait(testCtx(t), name, seen, timeout) }()
	return done
}

// wantWoken fails unless Wait returns nil within limit, and returns how
// long it took.
func wantWoken(t *testing.T, done <-chan error, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("waiter not woken within %v", limit)
	}
	return 0
}

// blockedSessions returns the connection ids of s's sessions that the
// server shows blocked in GET_LOCK.
func blockedSessions(t *testing.T, s *Store, db *sql.DB) []int64 {
	t.Helper()
	s.mu.Lock()
	var ids []int64
	for lw := range s.waits {
		if id := lw.connID.Load(); id != 0 {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var blocked []int64
	for _, id := range ids {
		var n int
		if err := db.QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE LIKE '%ser lock%'", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			blocked = append(blocked, id)
		}
	}
	return blocked
}

// waitBlocked waits until n of s's sessions are blocked in GET_LOCK.
func waitBlocked(t *testing.T, s *Store, db *sql.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(blockedSessions(t, s, db)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions not blocked in GET_LOCK after 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockHolder is the session that holds a tenure's wake-up lock, 0 for none.
func lockHolder(t *testing.T, db *sql.DB, dbName, name string, token int64) int64 {
	t.Helper()
	var id sql.NullInt64
	if err := db.QueryRowContext(testCtx(t), "SELECT IS_USED_LOCK(?)", tenureLock(dbName, name, token, "")).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// percentile is the p-th percentile (0 < p ≤ 1) of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	return d[int(math.Ceil(p*float64(len(d))))-1]
}

func TestLockFollowsTenure(t *testing.T) {
	dsn, dbName := newDatabase(t)
	s := openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lockHolder(t, db, dbName, "n", rec.Token), s.locks.sessionID(); got != want || got == 0 {
		t.Errorf("after Acquire, the tenure's lock is held by session %d, want the store's lock session %d", got, want)
	}
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	if got := lockHolder(t, db, dbName, "n", rec.Token); got != 0 {
		t.Errorf("after Release, the tenure's lock is held by session %d, want free", got)
	}

	// A tenure that ends without a release (expired, taken by another)
	// gives its lock up on the renewal that finds it lost.
	short, err := s.Acquire(ctx, "n", "a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(short.Remaining + 50*time.Millisecond)
	if _, err := openStore(t, dsn).Acquire(ctx, "n", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, "n", "a", short.Token, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after a takeover = %v, want ErrLost", err)
	}
	if got := lockHolder(t, db, dbName, "n", short.Token); got != 0 {
		t.Errorf("after the lost Renew, the old tenure's lock is held by session %d, want free", got)
	}
}

// TestAnnotateLocksBeforeRowShowsWhere watches the row and the lock of
// the Where being annotated in one statement, in a tight loop, through 30
// Annotates: whenever the row shows a Where, the holder's session must
// already hold its lock. A waiter that read the new Where while its lock
// was still free (the session took it only after the UPDATE committed)
// took the holder's session for broken and polled every pollInterval for
// the rest of its Wait.
func TestAnnotateLocksBeforeRowShowsWhere(t *testing.T) {
	dsn, dbName := newDatabase(t)
	s := openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const annotates = 30
	var (
		current atomic.Int64 // the Annotate in flight
		stop    = make(chan struct{})
		done    = make(chan map[string]bool, 1)
		failed  = make(chan error, 1)
	)
	where := func(i int64) string { return fmt.Sprintf("host:%d", i) }
	go func() {
		unlocked := map[string]bool{} // Wheres the row showed while their lock was free
		for {
			select {
			case <-stop:
				done <- unlocked
				return
			default:
			}
			w := where(current.Load())
			var (
				location string
				holder   sql.NullInt64
			)
			err := db.QueryRowContext(ctx, "SELECT location, IS_USED_LOCK(?) FROM `"+leasesTable+"` WHERE name = ?",
				tenureLock(dbName, "n", rec.Token, w), "n").Scan(&location, &holder)
			if err != nil {
				failed <- err
				return
			}
			if location == w && !holder.Valid {
				unlocked[w] = true
			}
		}
	}()
	for i := int64(1); i <= annotates; i++ {
		current.Store(i)
		time.Sleep(2 * time.Millisecond) // the watcher reads the lock of where(i) now
		if err := s.Annotate(ctx, "n", "a", rec.Token, where(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	select {
	case unlocked := <-done:
		if len(unlocked) > 0 {
			t.Errorf("the row showed %d of %d Wheres while nobody held their lock", len(unlocked), annotates)
		}
	case err := <-failed:
		t.Fatal(err)
	}
	if got, want := lockHolder(t, db, dbName, "n", rec.Token), int64(0); got != want {
		t.Errorf("the lock of the empty Where is held by session %d after the Annotates, want free", got)
	}

	// An Annotate that finds the tenure lost leaves neither lock held.
	short, err := s.Acquire(ctx, "m", "a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(short.Remaining + 50*time.Millisecond)
	if err := s.Annotate(ctx, "m", "a", short.Token, "elsewhere"); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Annotate of an expired tenure = %v, want ErrLost", err)
	}
	for _, w := range []string{"", "elsewhere"} {
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", tenureLock(dbName, "m", short.Token, w)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id.Valid {
			t.Errorf("after a lost Annotate, the lock of Where %q is held by session %d, want free", w, id.Int64)
		}
	}
}

// campaign acquires name for holder the way the election loop does: on
// *lease.HeldError it waits for the known expiry or a change, then tries
// again. It reports the acquired record, how many acquires it sent, and
// when its last Wait returned.
func campaign(ctx context.Context, s *Store, name, holder string, ttl time.Duration) <-chan campaignResult {
	won := make(chan campaignResult, 1)
	go func() {
		var woke time.Time
		for attempts := 1; ctx.Err() == nil; attempts++ {
			rec, err := s.Acquire(ctx, name, holder, ttl)
			if err == nil {
				won <- campaignResult{rec, attempts, woke}
				return
			}
			wait, seen := 100*time.Millisecond, lease.Record{}
			var held *lease.HeldError
			if errors.As(err, &held) {
				wait, seen = held.Record.Remaining, held.Record
			}
			s.Wait(ctx, name, seen, wait)
			woke = time.Now()
		}
	}()
	return won
}

type campaignResult struct {
	rec      lease.Record
	attempts int
	woke     time.Time
}

// TestHandOffLatency measures, over 25 hand-offs, release → the waiting
// follower's Wait returned and release → its successful acquire. The
// follower waits on a lease with a minute left, blocked in GET_LOCK, so
// only the release's wake-up lock can wake it in time.
func TestHandOffLatency(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	const runs = 25
	var wakes, lags []time.Duration
	for range runs {
		rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		won := campaign(ctx, follower, "relay", "follower", time.Minute)
		waitBlocked(t, follower, db, 1)
		released := time.Now()
		if err := leader.Release(ctx, "relay", "leader", rec.Token); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-won:
			lags = append(lags, time.Since(released))
			wakes = append(wakes, got.woke.Sub(released))
			if got.attempts > 2 {
				t.Errorf("follower sent %d acquires for one hand-off, want 2 (refused, then granted)", got.attempts)
			}
			if err := follower.Release(ctx, "relay", "follower", got.rec.Token); err != nil {
				t.Fatal(err)
			}
		case <-time.After(wakeLimit):
			t.Fatalf("follower did not acquire within %v of the release (the lease had a minute left)", wakeLimit)
		}
	}
	slices.Sort(wakes)
	slices.Sort(lags)
	t.Logf("%d hand-offs: release → waiter woken p50 %v, p99 %v; release → follower acquired p50 %v, p99 %v",
		runs, percentile(wakes, 0.5), percentile(wakes, 0.99), percentile(lags, 0.5), percentile(lags, 0.99))
}

// TestKilledHolderSessionWakesWaiter kills the holder's lock session
// (KILL CONNECTION, as when its process dies) while a follower waits on
// the tenure with half a minute to go: the server frees the lock, which
// wakes the follower at once. 20 runs; the holder's store opens a new lock
// session for its next tenure.
func TestKilledHolderSessionWakesWaiter(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	const runs = 20
	var wakes []time.Duration
	for range runs {
		rec, err := leader.Acquire(ctx, "relay", "leader", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		done := startWait(t, follower, "relay", rec, 30*time.Second)
		waitBlocked(t, follower, db, 1)
		killed := time.Now()
		exec(t, db, fmt.Sprintf("KILL CONNECTION %d", leader.locks.sessionID()))
		wantWoken(t, done, wakeLimit)
		wakes = append(wakes, time.Since(killed))
		if err := leader.Release(ctx, "relay", "leader", rec.Token); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(wakes)
	t.Logf("%d kills of the holder's lock session: kill → waiter woken p50 %v, p99 %v",
		runs, percentile(wakes, 0.5), percentile(wakes, 0.99))
}

// TestCrashedHolderIsSucceededAtExpiry closes the holder's store without a
// release, as when its process dies: the follower wakes, finds the lease
// still unexpired, sleeps until its expiry without spinning, and takes it
// over then.
func TestCrashedHolderIsSucceededAtExpiry(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	const ttl = 2 * time.Second
	rec, err := leader.Acquire(ctx, "relay", "leader", ttl)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	won := campaign(ctx, follower, "relay", "follower", time.Minute)
	waitBlocked(t, follower, admin(t, dsn), 1)
	crashed := time.Now()
	leader.Close()
	before := follower.Statements()
	select {
	case got := <-won:
		took := time.Since(crashed)
		left := rec.Remaining - crashed.Sub(granted)
		t.Logf("holder crashed with about %v left on its lease; follower acquired %v after the crash, with %d acquires and %d statements",
			left.Round(time.Millisecond), took.Round(time.Millisecond), got.attempts, follower.Statements()-before)
		if got.attempts > 4 {
			t.Errorf("follower sent %d acquires, want at most 4 (it sleeps until the expiry)", got.attempts)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("follower did not take over after the expiry")
	}
}

func TestRenewDoesNotWakeWaiter(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 1500 * time.Millisecond
	start := time.Now()
	done := startWait(t, follower, "n", rec, timeout)
	waitBlocked(t, follower, admin(t, dsn), 1)
	for range 3 {
		if _, err := leader.Renew(ctx, "n", "a", rec.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	wantWoken(t, done, 10*time.Second)
	if got := time.Since(start); got < timeout-50*time.Millisecond {
		t.Errorf("Wait returned after %v with only renewals, want the full %v", got, timeout)
	}
}

// TestTimedOutWaitsReuseOneSession runs a follower's Waits back to back,
// each blocked in GET_LOCK until its timeout, as an idle follower's Wait
// ends once per lease duration (its Acquire in between takes a round
// trip). Every Wait must block on the same session, which the server
// shows: a Wait that returned while its GET_LOCK was still timing out
// left the next one to open a session of its own, three statements to set
// up, most of an idle group's store load beyond its renewals.
func TestTimedOutWaitsReuseOneSession(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	db := admin(t, dsn)
	rec, err := leader.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Each Wait blocks long enough for the test to see its session on a
	// loaded machine before it times out.
	const (
		rounds  = 4
		timeout = 3 * time.Second
	)
	sessions := map[int64]bool{}
	for range rounds {
		start := time.Now()
		done := startWait(t, follower, "n", rec, timeout)
		waitBlocked(t, follower, db, 1)
		for _, id := range blockedSessions(t, follower, db) {
			sessions[id] = true
		}
		wantWoken(t, done, timeout+time.Minute)
		if got := time.Since(start); got < timeout {
			t.Errorf("Wait returned after %v, before its timeout %v", got, timeout)
		}
	}
	if got := len(sessions); got != 1 {
		t.Errorf("%d Waits that timed out blocked on %d sessions, want 1", rounds, got)
	}
	if got := follower.waitDB.Stats().OpenConnections; got != 1 {
		t.Errorf("follower has %d wake-up sessions open, want 1", got)
	}
}

// TestStepDownReachesLockWaiter: a step-down request rings the bell of the
// holder's own Wait on its tenure, which wakes within a round trip, not at
// a poll or a renewal, and then pulses the tenure's lock, which wakes a
// follower blocked on it. The control requests the step-down as another
// user, who may not interrupt the holder's session: both Waits sleep on
// (the holder's renewal would tell it; the follower learns from the
// release).
func TestStepDownReachesLockWaiter(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			dsn, dbName := newDatabase(t)
			leader, follower := openStore(t, dsn), openStore(t, dsn)
			db := admin(t, dsn)
			ctx := testCtx(t)
			requester := follower
			if control {
				requester = openStore(t, otherUser(t, db, dsn, dbName))
			}
			rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			held := refusedRecord(t, follower, "n", "b")
			own := startWait(t, leader, "n", rec, 30*time.Second)
			waitBlocked(t, leader, db, 1)
			other := startWait(t, follower, "n", held, 30*time.Second)
			waitBlocked(t, follower, db, 1)
			asked := time.Now()
			if _, err := requester.RequestStepDown(ctx, "n", "b", time.Minute); err != nil {
				t.Fatal(err)
			}
			if control {
				select {
				case err := <-own:
					t.Fatalf("control: the holder's Wait returned (%v) though the requester may not interrupt it", err)
				case err := <-other:
					t.Fatalf("control: the follower's Wait returned (%v) before the release", err)
				case <-time.After(time.Second):
				}
				released := time.Now()
				if err := leader.Release(ctx, "n", "a", rec.Token); err != nil {
					t.Fatal(err)
				}
				wantWoken(t, other, wakeLimit)
				t.Logf("control: the follower's Wait woke %v after the release", time.Since(released))
				return
			}
			wantWoken(t, own, wakeLimit)
			t.Logf("the holder's own Wait learned of the step-down request after %v", time.Since(asked))
			wantWoken(t, other, wakeLimit)
			t.Logf("the follower's Wait learned of it after %v", time.Since(asked))
			if cur, err := follower.Get(ctx, "n"); err != nil || !cur.StepDown {
				t.Errorf("Get after the wake-up = %+v, %v; want the step-down request", cur, err)
			}
		})
	}
}

// TestTakeoverAfterExpiryReachesLockWaiter: the holder stops renewing but
// its session lives on, so its lock stays held; after the expiry another
// holder takes the name. A waiter blocked on the old tenure's lock with a
// long timeout learns of it from the poll at the expiry + expiryGrace,
// having sent no poll before the expiry.
func TestTakeoverAfterExpiryReachesLockWaiter(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower, taker := openStore(t, dsn), openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	before := follower.Statements()
	done := startWait(t, follower, "n", rec, 30*time.Second)
	waitBlocked(t, follower, admin(t, dsn), 1)
	time.Sleep(time.Until(granted.Add(rec.Remaining)) - 100*time.Millisecond)
	if n := follower.Statements() - before; n != 0 {
		t.Errorf("the waiter sent %d statements on its statement connections before the expiry, want none", n)
	}
	time.Sleep(150 * time.Millisecond)
	next, err := taker.Acquire(ctx, "n", "c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	took := wantWoken(t, done, expiryGrace+lockPollInterval+wakeLimit)
	t.Logf("the waiter learned of the takeover (token %d) %v after it", next.Token, took)
}

// refusedRecord is the record an Acquire by holder is refused with.
func refusedRecord(t *testing.T, s *Store, name, holder string) lease.Record {
	t.Helper()
	_, err := s.Acquire(testCtx(t), name, holder, time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire(%q, %q) = %v, want *lease.HeldError", name, holder, err)
	}
	return held.Record
}

// TestWaitsBeyondLockSessionsPoll fills every wake-up session of the
// follower's store; one more Wait polls, and still sees a release in time.
func TestWaitsBeyondLockSessionsPoll(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	for i := range maxLockWaiters {
		name := fmt.Sprintf("other-%d", i)
		rec, err := leader.Acquire(ctx, name, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		startWait(t, follower, name, rec, 30*time.Second)
	}
	waitBlocked(t, follower, db, maxLockWaiters)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := startWait(t, follower, "n", rec, 30*time.Second)
	time.Sleep(100 * time.Millisecond) // let it start; it cannot block in GET_LOCK
	if got := len(blockedSessions(t, follower, db)); got != maxLockWaiters {
		t.Errorf("%d sessions blocked in GET_LOCK, want the cap %d", got, maxLockWaiters)
	}
	released := time.Now()
	if err := leader.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, pollInterval+wakeLimit)
	t.Logf("a Wait beyond the %d wake-up sessions woke %v after the release", maxLockWaiters, time.Since(released))
}

// TestBrokenHolderSessionDoesNotSpin: with the holder's lock session gone
// (and not yet replaced), the tenure's lock is free; a waiter must neither
// spin on it nor miss the release.
func TestBrokenHolderSessionDoesNotSpin(t *testing.T) {
	dsn, dbName := newDatabase(t)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	rec, err := leader.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, fmt.Sprintf("KILL CONNECTION %d", leader.locks.sessionID()))
	for lockHolder(t, db, dbName, "n", rec.Token) != 0 {
		time.Sleep(5 * time.Millisecond)
	}
	const timeout = time.Second
	before := follower.Statements()
	start := time.Now()
	if err := follower.Wait(ctx, "n", rec, timeout); err != nil {
		t.Fatal(err)
	}
	took, statements := time.Since(start), follower.Statements()-before
	if took < timeout-50*time.Millisecond {
		t.Errorf("Wait on a tenure whose lock is free returned after %v, want the full %v", took, timeout)
	}
	if max := int64(2 * timeout / pollInterval); statements > max {
		t.Errorf("Wait sent %d statements in %v, want at most %d (a poll every %v)", statements, took, max, pollInterval)
	}
	t.Logf("Wait on a tenure with a free lock: %d statements in %v", statements, took)

	done := startWait(t, follower, "n", rec, 30*time.Second)
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	if err := leader.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, pollInterval+wakeLimit)
	t.Logf("the release reached the polling waiter after %v", time.Since(released))
}

// TestCloseEndsBlockedSession: Close ends a Wait blocked in GET_LOCK with
// lease.ErrClosed, and its session's GET_LOCK on the server too.
func TestCloseEndsBlockedSession(t *testing.T) {
	dsn, _ := newDatabase(t)
	leader := openStore(t, dsn)
	follower, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := admin(t, dsn)
	rec, err := leader.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := startWait(t, follower, "n", rec, time.Minute)
	waitBlocked(t, follower, db, 1)
	ids := blockedSessions(t, follower, db)
	follower.Close()
	select {
	case err := <-done:
		if !errors.Is(err, lease.ErrClosed) {
			t.Errorf("Wait ended by Close = %v, want ErrClosed", err)
		}
	case <-time.After(wakeLimit):
		t.Fatal("Close did not end the Wait")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE LIKE '%ser lock%'", ids[0]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d still blocked in GET_LOCK 5s after Close", ids[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGrantOpensTheLockSessionBeforeItsTransaction: a grant opens the lock
// session, whose GET_LOCK it runs before committing, while its transaction
// starts, not inside it: a connection's handshake would otherwise lie on a
// hand-off's path with the lease row locked. The test holds the row so
// that the grant waits on it, and requires the session open meanwhile.
func TestGrantOpensTheLockSessionBeforeItsTransaction(t *testing.T) {
	dsn, _ := newDatabase(t)
	db := admin(t, dsn)
	ctx := testCtx(t)
	first := openStore(t, dsn)
	rec, err := first.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dsn)
	if id := s.locks.sessionID(); id != 0 {
		t.Fatalf("a store that was never granted has lock session %d", id)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT name FROM `"+leasesTable+"` WHERE name = 'n' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "n", "b", time.Minute)
		granted <- err
	}()
	deadline := time.Now().Add(3 * time.Second) // under the grant's lock wait timeout
	for s.locks.sessionID() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	open := s.locks.sessionID() != 0
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("Acquire once the row was free: %v", err)
	}
	if !open {
		t.Error("the lock session was not open while the grant waited for the lease row")
	}
}
