package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// pollInterval is how often a Store with waiters reads PRAGMA data_version
// where it cannot keep a FIFO in the wake directory (see wake). It bounds
// how late a waiter then learns of a release in another process.
const pollInterval = 25 * time.Millisecond

// Wait implements lease.Store. It returns nil as soon as name's tenure
// differs from seen (lease.SameTenure); renewals do not wake it. A change
// of hands writes to the FIFO that each Store with waiters keeps in the
// wake directory; each waiter then re-reads its row. Without the FIFO, one
// connection per Store polls PRAGMA data_version every pollInterval
// instead. A store error ends Wait early with nil, a spurious wake-up; the
// caller's next operation reports the error.
func (s *Store) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	return lease.AwaitTenure(ctx, s.waitFor, s.Get, name, seen, timeout)
}

// WaitGroup implements lease.Store as Wait does, comparing the whole group
// (lease.SameGroup).
func (s *Store) WaitGroup(ctx context.Context, group string, seen lease.Group, timeout time.Duration) (lease.Group, error) {
	return lease.AwaitGroup(ctx, s.waitFor, s.GetGroup, group, seen, timeout)
}

// waitFor returns nil once changed reports a change or an error, or at
// timeout; ctx's error when ctx ends; lease.ErrClosed when the store is
// closed. It calls changed first with the wake-up watch already in place,
// and again after every wake-up. It is a lease.WaitFunc; the key goes
// unused, as every change to the database wakes every waiter.
func (s *Store) waitFor(ctx context.Context, _ string, timeout time.Duration, changed func(context.Context) (bool, error)) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	next, done := s.current().watch.subscribe()
	defer done()
	for first := true; ; first = false {
		// Take the next channel before reading, so that a change after
		// the read closes it.
		ch := next()
		moved, err := changed(ctx)
		switch {
		case lease.IfClosed(s.closed) != nil:
			return lease.ErrClosed
		case ctx.Err() != nil:
			return ctx.Err()
		case moved || err != nil:
			return nil
		}
		if first && waitSubscribed != nil {
			waitSubscribed()
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return lease.ErrClosed
		}
	}
}

// waitSubscribed, when set by a test, is called once a Wait has read the
// current state and any later change will wake it.
var waitSubscribed func()

// watcher tells the waiters when a name in the database may have changed
// hands, while any Wait is running: it reads its FIFO in the wake
// directory, or else polls PRAGMA data_version on one dedicated connection.
// data_version moves whenever another connection, in this process or
// another, commits a change.
type watcher struct {
	db      *sql.DB // a pool of one connection, used only by run
	wakeDir string
	owner   dbOwner     // the database file's
	warn    func(error) // told why no FIFO could be made

	mu       sync.Mutex    // guards the fields below
	waiters  int           // Waits subscribed
	changed  chan struct{} // closed, then replaced, when the database may have changed
	watching bool          // a FIFO is read; once made it is kept until close
	stop     func()        // ends the running poller; nil when none runs
	done     chan struct{} // closed when the last poller started has ended
	closed   bool
}

func newWatcher(db *sql.DB, wakeDir string, owner dbOwner, warn func(error)) *watcher {
	done := make(chan struct{})
	close(done)
	return &watcher{db: db, wakeDir: wakeDir, owner: owner, warn: warn, changed: make(chan struct{}), done: done}
}

// subscribe registers a waiter, starting a watch if it is the first.
// Where a FIFO can be made, it is in the wake directory when subscribe
// returns, so a change after the caller reads its starting state cannot be
// missed.
// changed returns the channel that the next change closes; done ends the
// subscription and must be called once.
func (w *watcher) subscribe() (changed func() <-chan struct{}, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiters++
	if w.stop == nil && !w.closed {
		ctx, cancel := context.WithCancel(context.Background())
		prev, finished := w.done, make(chan struct{})
		w.stop, w.done = cancel, finished
		ww, err := watchWake(w.wakeDir, w.owner)
		if err != nil {
			w.warn(err)
			ww = nil // poll instead
		}
		w.watching = ww != nil
		go w.run(ctx, ww, prev, finished)
	}
	changed = func() <-chan struct{} {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.changed
	}
	done = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.waiters--
		// A FIFO costs nothing while idle and is ready for the next
		// Wait; only polling stops.
		if w.waiters == 0 && w.stop != nil && !w.watching {
			w.stop()
			w.stop = nil
		}
	}
	return changed, done
}

// run watches until ctx ends, then closes finished: through ww when
// subscribe could make a FIFO, else by polling. It starts only
// once the previous run, which ends when prev is closed, has let go of the
// polling connection.
func (w *watcher) run(ctx context.Context, ww *wakeWatch, prev <-chan struct{}, finished chan<- struct{}) {
	defer close(finished)
	<-prev // cancelled before this run started, so it ends promptly
	if ww != nil {
		w.notified(ctx, ww)
		return
	}
	w.poll(ctx)
}

// notified wakes the waiters whenever the FIFO is written. Should the
// watch fail, it wakes them once more and lets the next subscribe start
// again.
func (w *watcher) notified(ctx context.Context, ww *wakeWatch) {
	stop := context.AfterFunc(ctx, func() { ww.Close() })
	defer stop()
	defer ww.Close()
	for ww.next() == nil {
		w.broadcast()
	}
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	w.watching = false
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.mu.Unlock()
	w.broadcast()
}

// poll reads PRAGMA data_version every pollInterval and wakes the waiters
// when it moves, or after an error. The first successful poll after a
// start or an error also wakes them: a change may have slipped in before
// it.
func (w *watcher) poll(ctx context.Context) {
	var conn *sql.Conn // the dedicated connection; nil after an error
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := int64(-1) // data_version seen last; -1 for none
	for {
		v, err := w.dataVersion(ctx, &conn)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if conn != nil {
				conn.Close()
				conn = nil
			}
			last = -1
			w.broadcast()
		case v != last:
			last = v
			w.broadcast()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (w *watcher) dataVersion(ctx context.Context, conn **sql.Conn) (int64, error) {
	if *conn == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		*conn = c
	}
	var v int64
	err := (*conn).QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err
}

func (w *watcher) broadcast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

// close stops the poller, wakes every waiter and closes the connection.
func (w *watcher) close() error {
	w.mu.Lock()
	w.closed = true
	w.watching = false
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	done := w.done
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	<-done
	if err := w.db.Close(); err != nil {
		return fmt.Errorf("close watcher: %w", err)
	}
	return nil
}
