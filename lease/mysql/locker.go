package mysql

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"time"
)

// Timing of the holder's lock session.
const (
	// lockOpTimeout bounds each statement on the lock session. Taking,
	// releasing and pulsing a lock never wait for anyone for long, so a
	// statement that takes longer means the session is broken.
	lockOpTimeout = 2 * time.Second
	// lockPingInterval is how often the keeper checks the lock session
	// while it holds locks, and retakes the locks a broken session lost.
	lockPingInterval = 10 * time.Second
)

// tenureLock is the named lock that wakes the waiters of one tenure as
// its record's Where is: a hash of the database, the lease name, the token
// and where. A later tenure of the same name has another lock, so a
// session that still holds an old tenure's lock (a partitioned holder the
// server has not noticed) can never keep a later tenure's waiters asleep;
// and Annotate moves the tenure to the lock of its new Where, so that a
// waiter that read the old one finds its lock released or free.
func tenureLock(db, name string, token int64, where string) string {
	return lockName("tenure", db, name, strconv.FormatInt(token, 10), where)
}

// bellLock is the named lock that the holder's own Wait on its tenure
// (the wait for a step-down request) holds while it blocks: a step-down
// request finds that session by the lock (IS_USED_LOCK) and interrupts
// its wait (KILL QUERY), which wakes it.
func bellLock(db, name string, token int64) string {
	return lockName("bell", db, name, strconv.FormatInt(token, 10))
}

// locker owns the session that holds the wake-up lock of every tenure this
// Store was granted: GET_LOCK(tenureLock, 0) before the grant commits,
// RELEASE_LOCK after the release commits. Waiters block in GET_LOCK on the
// same key (see Wait), so a release wakes them at once, and so does the
// server when this session dies with the process. The locks only wake;
// the lease row decides.
//
// When the session breaks, the keeper goroutine reconnects and takes the
// locks of the tenures it still holds again; until then their waiters
// poll.
type locker struct {
	db *sql.DB // a pool of one; the session is pinned in conn
	// dbName is the database, part of every lock's name.
	dbName string

	mu      sync.Mutex // guards the fields below and serializes the session's statements
	conn    *sql.Conn  // nil while there is no session
	connID  int64      // the session's CONNECTION_ID()
	held    map[string]heldLock
	stop    chan struct{}
	done    chan struct{}
	started bool // the keeper was started, or must not be any more
	warming bool // warm's goroutine is on its way
}

// heldLock is a tenure whose lock the locker holds or should hold.
type heldLock struct {
	token  int64
	where  string // the record's Where, part of the lock's name
	locked bool   // the current session holds it
	// moving is set while an Annotate to next is in flight (prepare);
	// nextLocked, while the current session holds next's lock too.
	moving     bool
	next       string
	nextLocked bool
}

func (h heldLock) key(db, name string) string     { return tenureLock(db, name, h.token, h.where) }
func (h heldLock) nextKey(db, name string) string { return tenureLock(db, name, h.token, h.next) }

func newLocker(db *sql.DB, dbName string) *locker {
	return &locker{db: db, dbName: dbName, held: map[string]heldLock{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// warm opens the session in the background if there is none, for a
// grant about to be tried: its take then finds the session open, instead
// of opening it inside the grant's transaction (a connection's handshake
// on a hand-off's path, with the lease row locked).
func (l *locker) warm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil || l.closing() || l.warming {
		return
	}
	l.warming = true
	go func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.warming = false
		if !l.closing() {
			l.connectLocked(context.Background())
		}
	}()
}

// closing reports whether close has begun: no session opens from then on
// (one opened just before is discarded by close, under mu).
func (l *locker) closing() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// take makes the lock of name's tenure token held, replacing the lock of
// an earlier tenure of name. It reports nothing: a lock that could not be
// taken leaves the tenure's waiters polling until the keeper retakes it.
// The locker's statements do not follow the callers' contexts: one
// abandoned mid-statement would end the session and every lock on it.
func (l *locker) take(name string, token int64) {
	ctx := context.Background() // each statement has lockOpTimeout
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		l.started = true
		go l.keep()
	}
	if old, ok := l.held[name]; ok {
		l.releaseLocked(ctx, name, old)
	}
	h := heldLock{token: token}
	h.locked = l.getLocked(ctx, h.key(l.dbName, name), 0)
	l.held[name] = h
}

// drop releases the lock of name's tenure token, if held.
func (l *locker) drop(name string, token int64) {
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[name]; ok && h.token == token {
		l.releaseLocked(ctx, name, h)
	}
}

// holds reports whether the locker holds (or should hold) the lock of
// name's tenure token: whether this Store holds that tenure.
func (l *locker) holds(name string, token int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[name]
	return ok && h.token == token
}

// pulse releases and retakes the lock of name's tenure token, waking its
// waiters without ending the tenure: after a step-down request rang the
// holder's own Wait, so that the other waiters read the request. The
// waiters release the lock at once, so retaking it waits a few round
// trips.
func (l *locker) pulse(name string, token int64) {
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[name]
	if !ok || h.token != token || !h.locked {
		return
	}
	key := h.key(l.dbName, name)
	if !l.execLocked(ctx, "DO RELEASE_LOCK(?)", key) {
		return
	}
	h.locked = l.getLocked(ctx, key, 1)
	l.held[name] = h
}

// prepare takes the lock of where, the Where an Annotate of name's tenure
// token is about to write, in addition to the tenure's lock, before the
// Annotate's UPDATE commits: a waiter that reads the new Where then finds
// its lock held, never free (which it would take for a broken holder's
// session, and poll). Then rekey (committed) or unprepare (failed) ends
// the move. Without a healthy session holding the tenure's lock it does
// nothing, and rekey leaves the new lock to the keeper.
func (l *locker) prepare(name string, token int64, where string) {
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[name]
	if !ok || h.token != token || h.where == where || !h.locked {
		return
	}
	if h.moving && !l.unprepareLocked(ctx, name) {
		return // the session broke
	}
	h = l.held[name]
	h.moving, h.next, h.nextLocked = true, where, false
	got, err := l.tryLocked(ctx, h.nextKey(l.dbName, name), 0)
	if err != nil {
		l.brokenLocked()
		return
	}
	h.nextLocked = got
	l.held[name] = h
}

// unprepare ends a move to where that prepare started and whose Annotate
// failed: it releases where's lock.
func (l *locker) unprepare(name string, token int64, where string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[name]; ok && h.token == token && h.moving && h.next == where {
		l.unprepareLocked(context.Background(), name)
	}
}

// unprepareLocked ends name's move and releases the lock of its next Where
// if the session holds it, and reports whether the session is still
// healthy.
func (l *locker) unprepareLocked(ctx context.Context, name string) bool {
	h := l.held[name]
	next, locked := h.nextKey(l.dbName, name), h.nextLocked
	h.moving, h.next, h.nextLocked = false, "", false
	l.held[name] = h
	return !locked || l.execLocked(ctx, "DO RELEASE_LOCK(?)", next)
}

// rekey moves name's tenure token to the lock of its new Where once an
// Annotate committed it: it takes the new lock, unless prepare took it
// already, and releases the old one, which wakes the waiters blocked on
// it; a waiter that read the old Where and had not blocked yet finds the
// old lock free, reads again and sees the new Where.
func (l *locker) rekey(name string, token int64, where string) {
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[name]
	if !ok || h.token != token {
		return
	}
	prepared := h.moving && h.next == where && h.nextLocked
	if h.moving && !prepared {
		l.unprepareLocked(ctx, name) // a move to another Where, or one not locked
		h = l.held[name]
	}
	h.moving, h.next, h.nextLocked = false, "", false
	if h.where == where {
		l.held[name] = h
		return
	}
	old := h
	h.where, h.locked = where, prepared
	if old.locked && !prepared {
		if got, err := l.tryLocked(ctx, h.key(l.dbName, name), 0); err != nil {
			l.brokenLocked()
		} else {
			h.locked = got
		}
	}
	if old.locked {
		l.execLocked(ctx, "DO RELEASE_LOCK(?)", old.key(l.dbName, name))
	}
	if l.conn == nil {
		h.locked = false // the keeper takes it again
	}
	l.held[name] = h
}

// releaseLocked forgets name's lock h and releases it, and the lock of a
// move in flight.
func (l *locker) releaseLocked(ctx context.Context, name string, h heldLock) {
	delete(l.held, name)
	if h.locked {
		l.execLocked(ctx, "DO RELEASE_LOCK(?)", h.key(l.dbName, name))
	}
	if h.moving && h.nextLocked {
		l.execLocked(ctx, "DO RELEASE_LOCK(?)", h.nextKey(l.dbName, name))
	}
}

// getLocked takes key on the session, waiting up to wait seconds, and
// reports whether it holds it. A broken session is replaced once, and a
// new session first retakes the locks the old one lost.
func (l *locker) getLocked(ctx context.Context, key string, wait float64) bool {
	for range 2 {
		fresh := l.conn == nil
		if !l.connectLocked(ctx) {
			return false
		}
		if fresh {
			l.retakeLocked(ctx)
		}
		if l.conn == nil {
			continue // broke while retaking
		}
		held, err := l.tryLocked(ctx, key, wait)
		if err == nil {
			return held
		}
		l.brokenLocked()
	}
	return false
}

// retakeLocked takes the held tenures' locks that the session lacks.
func (l *locker) retakeLocked(ctx context.Context) {
	for name, h := range l.held {
		if h.locked {
			continue
		}
		held, err := l.tryLocked(ctx, h.key(l.dbName, name), 0)
		if err != nil {
			l.brokenLocked()
			return
		}
		h.locked = held
		l.held[name] = h
	}
}

// tryLocked runs GET_LOCK(key, wait) on the session.
func (l *locker) tryLocked(ctx context.Context, key string, wait float64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	var got sql.NullInt64
	err := l.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", key, wait).Scan(&got)
	return got.Int64 == 1, err
}

// execLocked runs stmt on the session and reports whether it succeeded; a
// failure ends the session.
func (l *locker) execLocked(ctx context.Context, stmt string, args ...any) bool {
	if l.conn == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	if _, err := l.conn.ExecContext(ctx, stmt, args...); err != nil {
		l.brokenLocked()
		return false
	}
	return true
}

// connectLocked opens the session if there is none.
func (l *locker) connectLocked(ctx context.Context) bool {
	if l.conn != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return false
	}
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&l.connID); err != nil {
		discard(conn)
		return false
	}
	l.conn = conn
	return true
}

// brokenLocked ends the session: every lock it held is lost.
func (l *locker) brokenLocked() {
	if l.conn != nil {
		discard(l.conn)
		l.conn, l.connID = nil, 0
	}
	for name, h := range l.held {
		h.locked, h.nextLocked = false, false
		l.held[name] = h
	}
}

// keep checks the session every lockPingInterval while it holds locks, and
// retakes the locks a broken session lost, until close.
func (l *locker) keep() {
	defer close(l.done)
	t := time.NewTicker(lockPingInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.check()
	}
}

func (l *locker) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) == 0 {
		return
	}
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lockOpTimeout)
		err := l.conn.PingContext(ctx)
		cancel()
		if err != nil {
			l.brokenLocked()
		}
	}
	if l.connectLocked(context.Background()) {
		l.retakeLocked(context.Background())
	}
}

// sessionID is the lock session's connection id, 0 without one.
func (l *locker) sessionID() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connID
}

// close ends the keeper and the session, which releases every lock.
func (l *locker) close() {
	l.mu.Lock()
	started := l.started
	l.started = true // no keeper starts after close
	l.mu.Unlock()
	close(l.stop)
	if started {
		<-l.done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		discard(l.conn)
		l.conn = nil
	}
	clear(l.held)
}
