package lease

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Reconnection of a Listener's session.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// A Session holds a store's notification connection (PostgreSQL's LISTEN,
// a Redis subscription) until it fails or ctx ends: it connects, makes the
// channel take effect, calls up (again each time the channel is confirmed
// anew, as after a reconnection the client made by itself), and calls
// deliver with the payload (a lease or group name) of every notification.
// It reports whether the channel ever took effect.
type Session func(ctx context.Context, up func(), deliver func(name string)) (listened bool)

// Listener keeps a store's notification session running while anyone
// waits, reconnecting with back-off, and fans notifications out to the
// waiters of each name; a notification of a partition also wakes its
// group's waiters. It is what PostgreSQL and Redis share of Wait.
type Listener struct {
	session Session

	mu      sync.Mutex // guards the fields below
	started bool
	stopped bool
	up      bool                                  // the channel is in effect
	epoch   uint64                                // counts the times it took effect
	waiters map[string]map[chan struct{}]struct{} // per key; each channel has room for one wake-up
	state   chan struct{}                         // closed and replaced when up or epoch changes
	subs    chan struct{}                         // closed and replaced when the waiters change
	cancel  context.CancelFunc                    // ends run; set when started
	done    chan struct{}                         // closed when run has returned
}

// NewListener returns a Listener that runs session from the first Wait
// until Stop.
func NewListener(session Session) *Listener {
	return &Listener{
		session: session,
		waiters: map[string]map[chan struct{}]struct{}{},
		state:   make(chan struct{}),
		subs:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// Wait is a store's Wait on key (a name or a group): it subscribes to key's
// notifications, then runs Notified.Loop with changed until a change,
// timeout, ctx's end, or closed.
func (l *Listener) Wait(ctx context.Context, key string, closed <-chan struct{}, poll, timeout time.Duration,
	changed func(context.Context) (bool, error)) error {
	wake := make(chan struct{}, 1)
	l.subscribe(key, wake)
	defer l.unsubscribe(key, wake)
	return Notified{Wake: wake, State: l.Notice, Closed: closed, Poll: poll}.Loop(ctx, timeout, changed)
}

// Notice returns the channel's state.
func (l *Listener) Notice() Notice {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Notice{Up: l.up, Epoch: l.epoch, Changed: l.state}
}

// Listening reports whether the channel is up with a waiter on key, and
// returns a channel closed at the next change of either: a test's way to
// know that a change made now will be notified.
func (l *Listener) Listening(key string) (ok bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	state, subs := l.state, l.subs
	go func() {
		select {
		case <-state:
		case <-subs:
		}
		close(ch)
	}()
	return l.up && len(l.waiters[key]) > 0, ch
}

// Stop ends the session and waits for its goroutine. It is idempotent.
func (l *Listener) Stop() {
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

func (l *Listener) subscribe(key string, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.stopped {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		go l.run(ctx)
	}
	if l.waiters[key] == nil {
		l.waiters[key] = map[chan struct{}]struct{}{}
	}
	l.waiters[key][wake] = struct{}{}
	broadcast(&l.subs)
}

func (l *Listener) unsubscribe(key string, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[key], wake)
	if len(l.waiters[key]) == 0 {
		delete(l.waiters, key)
	}
	broadcast(&l.subs)
}

// run keeps a session until ctx ends, with jittered, capped back-off
// between sessions that failed.
func (l *Listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := listenMinBackoff
	for {
		if l.session(ctx, l.setUp, l.deliver) {
			backoff = listenMinBackoff
		}
		l.setDown()
		sleep := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, listenMaxBackoff)
		if Sleep(ctx, sleep) != nil {
			return
		}
	}
}

// deliver wakes the waiters of name and, for a partition, of its group.
func (l *Listener) deliver(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := []string{name}
	if group, _, ok := SplitPartitionKey(name); ok {
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

func (l *Listener) setUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = true
	l.epoch++
	broadcast(&l.state)
}

func (l *Listener) setDown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up {
		l.up = false
		broadcast(&l.state)
	}
}

func broadcast(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// Sleep waits for d, or until ctx ends, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
