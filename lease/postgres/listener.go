package postgres

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// Reconnection of the LISTEN connection.
const (
	listenConnectTimeout = 10 * time.Second
	listenMinBackoff     = 100 * time.Millisecond
	listenMaxBackoff     = 5 * time.Second
)

// listener owns a Store's dedicated LISTEN connection. One goroutine, run,
// holds the connection, reconnects with back-off when it breaks, and fans
// notifications out to the waiters of each lease name. It starts on the
// first subscribe and ends when stop is called.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string

	mu      sync.Mutex // guards the fields below
	started bool
	stopped bool
	up      bool                                  // LISTEN is in effect
	epoch   uint64                                // counts LISTENs that took effect
	pid     uint32                                // server process of the current connection
	waiters map[string]map[chan struct{}]struct{} // per name; each channel has room for one wake-up
	// state is closed and replaced whenever up or epoch changes.
	state chan struct{}
	// subs is closed and replaced whenever the set of waiters changes.
	subs chan struct{}

	cancel context.CancelFunc // ends run; set when started
	done   chan struct{}      // closed when run has returned
}

// listenState is what a waiter needs to know about the listener.
type listenState struct {
	up      bool
	epoch   uint64
	changed <-chan struct{}
}

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	return &listener{
		cfg:     cfg,
		channel: channel,
		waiters: map[string]map[chan struct{}]struct{}{},
		state:   make(chan struct{}),
		subs:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// subscribe registers wake to receive a value when a notification for name
// arrives, starts the listener if it is not running, and returns the
// listener's state.
func (l *listener) subscribe(name string, wake chan struct{}) listenState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.stopped {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go l.run(ctx)
	}
	if l.waiters[name] == nil {
		l.waiters[name] = map[chan struct{}]struct{}{}
	}
	l.waiters[name][wake] = struct{}{}
	l.broadcastLocked(&l.subs)
	return l.stateLocked()
}

func (l *listener) unsubscribe(name string, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[name], wake)
	if len(l.waiters[name]) == 0 {
		delete(l.waiters, name)
	}
	l.broadcastLocked(&l.subs)
}

// current returns the listener's state as it concerns name.
func (l *listener) current(name string) listenState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

func (l *listener) stateLocked() listenState {
	return listenState{up: l.up, epoch: l.epoch, changed: l.state}
}

// stop ends the listener and waits for its goroutine. It is idempotent.
func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	started := l.started
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	if started {
		<-l.done
	}
}

// run keeps a LISTEN connection until ctx ends.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := listenMinBackoff
	for {
		listened, _ := l.session(ctx)
		l.setDown()
		if listened {
			backoff = listenMinBackoff
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, listenMaxBackoff)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// session connects, listens, and delivers notifications until the
// connection fails or ctx ends. listened reports whether LISTEN took
// effect.
func (l *listener) session(ctx context.Context) (listened bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return false, err
	}
	defer closeConn(conn)
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false, err
	}
	l.setUp(conn.PgConn().PID())
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.deliver(n.Payload)
	}
}

// deliver wakes the waiters of name and, for a partition, of its group.
func (l *listener) deliver(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := []string{name}
	if group, _, ok := lease.SplitPartitionKey(name); ok {
		keys = append(keys, group)
	}
	for _, key := range keys {
		for wake := range l.waiters[key] {
			select {
			case wake <- struct{}{}:
			default: // already has a wake-up pending
			}
		}
	}
}

func (l *listener) setUp(pid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up, l.pid = true, pid
	l.epoch++
	l.broadcastLocked(&l.state)
}

func (l *listener) setDown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up {
		l.up, l.pid = false, 0
		l.broadcastLocked(&l.state)
	}
}

func (l *listener) broadcastLocked(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}
