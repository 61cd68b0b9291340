package redis

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestModel checks the store against the lease rules (leasetest.RunModel)
// on virtual clocks: a handle's scripts read the time from a key the test sets
// instead of from TIME, and are otherwise unchanged. (The virtual clock
// runs a day ahead of the server's, so the expiry that garbage-collects a
// name's candidates key never fires early.)
func TestModel(t *testing.T) {
	url := serverURL(t)
	dsn, prefix := redistest.PrefixOn(t, url)
	k := keys{prefix: prefix + ":"}
	admin := adminClient(t, url)
	var clocks atomic.Int64
	const timeCall = "redis.call('TIME')"
	leasetest.RunModel(t, leasetest.ModelHarness{
		Open: func(t *testing.T) leasetest.ModelStore {
			clock := &keyClock{VirtualClock: leasetest.NewVirtualClock(), key: fmt.Sprintf("%s:clock:%d", prefix, clocks.Add(1)), client: admin}
			clock.Advance(testCtx(t), 0)
			read := fmt.Sprintf("redis.call('HMGET', '%s', 's', 'us')", clock.key)
			s, err := Open(testCtx(t), dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			s.scripts = loadScripts(func(src string) string {
				if strings.Count(src, timeCall) != 1 {
					t.Fatalf("a script reads the clock other than by one %s", timeCall)
				}
				return strings.Replace(src, timeCall, read, 1)
			})
			return leasetest.ModelStore{Store: s, Clock: clock, Plant: func(t *testing.T, rec lease.Record) {
				at := rec.Expires.UnixMicro()
				rel := "0"
				if rec.Released {
					rel = "1"
				}
				ctx := testCtx(t)
				if err := admin.HSet(ctx, k.lease(rec.Name), "name", rec.Name, "holder", rec.Holder, "token", rec.Token,
					"acq", at, "ren", at, "exp", at, "rel", rel, "sd", "0", "succ", "", "excl", "", "resv", 0, "where", "").Err(); err != nil {
					t.Fatal(err)
				}
				if err := admin.Set(ctx, k.token(rec.Name), rec.Token, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}}
		},
	})
}

// keyClock is a virtual clock kept in a hash (seconds and microseconds,
// as TIME answers) that the edited scripts read.
type keyClock struct {
	*leasetest.VirtualClock
	key    string
	client *goredis.Client
}

func (c *keyClock) Advance(ctx context.Context, d time.Duration) {
	c.VirtualClock.Advance(ctx, d)
	t := c.Read()
	if err := c.client.HSet(ctx, c.key, "s", t.Unix(), "us", t.Nanosecond()/1000).Err(); err != nil {
		panic(fmt.Sprintf("set the virtual clock: %v", err))
	}
}
