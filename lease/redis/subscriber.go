package redis

import (
	"context"
	"errors"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// healthInterval is how long the subscription may stay silent before it
// sends a PING; a second silent interval ends the session, so a blackholed
// subscription is noticed within two intervals.
const healthInterval = 3 * time.Second

// subscriber owns a Store's subscription to its wake-up channel, run by a
// lease.Listener from the first Wait until the Store closes: each session is
// a go-redis PubSub on its own connection.
//
// Pub/Sub loses what is published while a subscription is down, so every
// waiter must read the state again after the subscription came (back) up:
// every SUBSCRIBE confirmation counts as the channel coming up, including
// one that follows a reconnect that go-redis made on its own.
type subscriber struct {
	*lease.Listener
	client  *goredis.Client
	channel string
}

func newSubscriber(client *goredis.Client, channel string) *subscriber {
	s := &subscriber{client: client, channel: channel}
	s.Listener = lease.NewListener(s.session)
	return s
}

// session subscribes on a new PubSub and delivers its messages until it
// fails, stays silent through a PING, or ctx ends. It reports whether
// SUBSCRIBE took effect.
func (s *subscriber) session(ctx context.Context, up func(), deliver func(string)) (confirmed bool) {
	ps := s.client.Subscribe(ctx, s.channel)
	defer ps.Close()
	stop := context.AfterFunc(ctx, func() { ps.Close() }) // interrupts a blocked receive
	defer stop()
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
			if m.Kind == "subscribe" && m.Channel == s.channel {
				// The first confirmation, or one after go-redis
				// reconnected on its own: either way, what was
				// published before it may be lost.
				confirmed = true
				up()
			}
		case *goredis.Message:
			deliver(m.Payload)
		}
	}
	return confirmed
}
