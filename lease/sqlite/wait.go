package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// pollInterval is how often a Store with waiters reads PRAGMA data_version
// where inotify is not available. It bounds how late a waiter then learns
// of a release in another process.
const pollInterval = 25 * time.Millisecond

// Wait implements lease.Store. It returns nil as soon as the holder, token,
// released or step-down flag of name (or whether it exists) differs from
// what they were when Wait began; renewals do not wake it. A change of
// hands writes the wake file, which one inotify watch per Store sees at
// once; each waiter then re-reads its row. Without inotify, one connection
// per Store polls PRAGMA data_version every pollInterval instead. A store
// error ends Wait early with nil, a spurious wake-up; the caller's next
// operation reports the error.
func (s *Store) Wait(ctx context.Context, name string, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	changed, done := s.watch.subscribe()
	defer done()
	ch := changed()
	start, known, moved := s.recalled(name)
	if moved {
		return nil // a change was announced since the caller's Acquire read
	}
	if !known {
		var err error
		if start, err = s.owner(ctx, name); err != nil {
			return ctx.Err()
		}
	}
	if waitSubscribed != nil {
		waitSubscribed()
	}
	for {
		select {
		case <-ch:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
		// Take the next channel before reading the row, so that a change
		// after the read closes it.
		ch = changed()
		cur, err := s.owner(ctx, name)
		if err != nil || cur != start {
			return ctx.Err()
		}
	}
}

// waitSubscribed, when set by a test, is called once a Wait has read its
// starting state and any later change will wake it.
var waitSubscribed func()

// owner is what Wait compares: who holds a name under which token, whether
// it was released, and whether a step-down was requested.
type owner struct {
	exists   bool
	holder   string
	token    int64
	released bool
	stepDown bool
}

func (s *Store) owner(ctx context.Context, name string) (owner, error) {
	rec, err := s.Get(ctx, name)
	if errors.Is(err, lease.ErrNotFound) {
		return owner{}, nil
	}
	if err != nil {
		return owner{}, err
	}
	return ownerOf(rec), nil
}

func ownerOf(rec lease.Record) owner {
	return owner{exists: true, holder: rec.Holder, token: rec.Token, released: rec.Released, stepDown: rec.StepDown}
}

// seen is what a refused Acquire read of a name, and the watcher's
// generation just before that read.
type seen struct {
	owner owner
	gen   uint64
}

// remember keeps what a refused Acquire read, taken while the wake watch
// ran at generation gen, so that the Wait that follows need not read again.
func (s *Store) remember(name string, o owner, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = make(map[string]seen)
	}
	s.seen[name] = seen{owner: o, gen: gen}
}

// recalled returns what a refused Acquire read of name, while the wake
// watch ran: known when no change of hands has been announced since (the
// watch's generation has not moved), moved when one has, in which case
// the caller should look again at once. With neither, the caller reads
// the record itself. The caller has subscribed already, so a change after
// this check wakes it.
func (s *Store) recalled(name string) (o owner, known, moved bool) {
	gen, watching := s.watch.generation()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.seen[name]
	delete(s.seen, name) // good for one Wait only
	if !ok || !watching {
		return owner{}, false, false
	}
	if r.gen != gen {
		return owner{}, false, true
	}
	return r.owner, true, false
}

// watcher tells the waiters when a name in the database may have changed
// hands, while any Wait is running: it watches the wake file with inotify,
// or else polls PRAGMA data_version on one dedicated connection.
// data_version moves whenever another connection, in this process or
// another, commits a change.
type watcher struct {
	db       *sql.DB // a pool of one connection, used only by run
	wakePath string

	mu       sync.Mutex    // guards the fields below
	waiters  int           // Waits subscribed
	changed  chan struct{} // closed, then replaced, when the database may have changed
	gen      uint64        // how often changed was closed
	watching bool          // an inotify watch runs; once started it runs until close
	stop     func()        // ends the running poller; nil when none runs
	done     chan struct{} // closed when the last poller started has ended
	closed   bool
}

func newWatcher(db *sql.DB, wakePath string) *watcher {
	done := make(chan struct{})
	close(done)
	return &watcher{db: db, wakePath: wakePath, changed: make(chan struct{}), done: done}
}

// subscribe registers a waiter, starting a watch if it is the first.
// Where inotify works, the watch is in place when subscribe returns, so a
// change after the caller reads its starting state cannot be missed.
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
		ww, err := watchWake(w.wakePath)
		if err != nil {
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
		// An inotify watch costs nothing while idle and keeps counting
		// generations between Waits; only polling stops.
		if w.waiters == 0 && w.stop != nil && !w.watching {
			w.stop()
			w.stop = nil
		}
	}
	return changed, done
}

// run watches until ctx ends, then closes finished: through ww when
// subscribe could start an inotify watch, else by polling. It starts only
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

// notified wakes the waiters whenever the wake file is written. Should the
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
	w.gen++
}

// generation returns how many changes the watcher has announced, and
// whether an inotify watch is running, without which the count means
// nothing.
func (w *watcher) generation() (gen uint64, watching bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.watching
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
