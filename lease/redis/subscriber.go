package redis

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// Timing of the subscription.
const (
	// healthInterval is how long the subscription may stay silent before
	// it sends a PING; a second silent interval ends the session, so a
	// blackholed subscription is noticed within two intervals.
	healthInterval = 3 * time.Second
	subMinBackoff  = 100 * time.Millisecond
	subMaxBackoff  = 5 * time.Second
)

// subscriber owns a Store's subscription to its wake-up channel. One
// goroutine, run, holds a session (a go-redis PubSub on its own
// connection), starts a new one with back-off when it fails, and fans the
// messages out to the waiters of each name. It starts on the first
// subscribe and ends when stop is called.
//
// Pub/Sub loses what is published while a subscription is down, so every
// waiter must read the state again after the subscription came (back) up:
// the subscriber counts the SUBSCRIBE confirmations it receives (epoch),
// including one that follows a reconnect that go-redis made on its own,
// and announces each on state.
type subscriber struct {
	client  *goredis.Client
	channel string

	mu      sync.Mutex // guards the fields below
	started bool
	stopped bool
	up      bool                                  // a SUBSCRIBE is confirmed on the current session
	epoch   uint64                                // counts SUBSCRIBE confirmations
	waiters map[string]map[chan struct{}]struct{} // per name; each channel has room for one wake-up
	// state is closed and replaced whenever up or epoch changes.
	state chan struct{}
	// subs is closed and replaced whenever the set of waiters changes.
	subs    chan struct{}
	session *goredis.PubSub // the current session's, closed by stop

	cancel context.CancelFunc // ends run; set when started
	done   chan struct{}      // closed when run has returned
}

// subState is what a waiter needs to know about the subscription.
type subState struct {
	up      bool
	epoch   uint64
	changed <-chan struct{}
}

func newSubscriber(client *goredis.Client, channel string) *subscriber {
	return &subscriber{
		client:  client,
		channel: channel,
		waiters: map[string]map[chan struct{}]struct{}{},
		state:   make(chan struct{}),
		subs:    make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// subscribe registers wake to receive a value when name is published,
// starts the subscriber if it is not running, and returns its state.
func (l *subscriber) subscribe(name string, wake chan struct{}) subState {
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

func (l *subscriber) unsubscribe(name string, wake chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[name], wake)
	if len(l.waiters[name]) == 0 {
		delete(l.waiters, name)
	}
	l.broadcastLocked(&l.subs)
}

// current returns the subscriber's state.
func (l *subscriber) current() subState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

func (l *subscriber) stateLocked() subState {
	return subState{up: l.up, epoch: l.epoch, changed: l.state}
}

// stop ends the subscriber and waits for its goroutine. It is idempotent.
func (l *subscriber) stop() {
	l.mu.Lock()
	l.stopped = true
	started := l.started
	if l.cancel != nil {
		l.cancel()
	}
	if l.session != nil {
		l.session.Close() // interrupts a blocked receive
	}
	l.mu.Unlock()
	if started {
		<-l.done
	}
}

// run keeps a session until ctx ends.
func (l *subscriber) run(ctx context.Context) {
	defer close(l.done)
	backoff := subMinBackoff
	for {
		if l.serve(ctx) {
			backoff = subMinBackoff
		}
		l.setDown()
		sleep := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, subMaxBackoff)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// serve subscribes on a new session and delivers its messages until it
// fails, stays silent through a PING, or ctx ends. confirmed reports
// whether SUBSCRIBE took effect.
func (l *subscriber) serve(ctx context.Context) (confirmed bool) {
	ps := l.client.Subscribe(ctx, l.channel)
	defer ps.Close()
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return false
	}
	l.session = ps
	l.mu.Unlock()

	pinged := false
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, healthInterval)
		var nerr net.Error
		switch {
		case err == nil:
		case errors.As(err, &nerr) && nerr.Timeout() && !pinged:
			if err := ps.Ping(ctx); err != nil {
				return confirmed
			}
			pinged = true
			continue
		default:
			return confirmed
		}
		pinged = false
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" && m.Channel == l.channel {
				// The first confirmation, or one after go-redis
				// reconnected on its own: either way, what was
				// published before it may be lost.
				confirmed = true
				l.setUp()
			}
		case *goredis.Message:
			l.deliver(m.Payload)
		}
	}
	return confirmed
}

// deliver wakes the waiters of name and, for a partition, of its group.
func (l *subscriber) deliver(name string) {
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

func (l *subscriber) setUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = true
	l.epoch++
	l.broadcastLocked(&l.state)
}

func (l *subscriber) setDown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.session = nil
	if l.up {
		l.up = false
		l.broadcastLocked(&l.state)
	}
}

func (l *subscriber) broadcastLocked(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}
