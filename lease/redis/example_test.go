package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/redis"
)

// A replica opens the store, tries to take a name, and otherwise waits for
// the holder's expiry or a release, whichever is first.
func ExampleOpen() {
	ctx := context.Background()
	store, err := redis.Open(ctx, "rediss://app:s3cret@redis.internal:6379/0?leaderrun_prefix=leaderrun")
	if err != nil {
		log.Fatal(err) // errors.Is(err, lease.ErrRefused): fix the configuration; otherwise retry
	}
	defer store.Close()
	for {
		rec, err := store.Acquire(ctx, "relay", "host-a/4242", 15*time.Second)
		var held *lease.HeldError
		switch {
		case err == nil:
			fmt.Println("leading with token", rec.Token)
			return
		case errors.As(err, &held):
			store.Wait(ctx, "relay", held.Record, held.Record.Remaining)
		default:
			log.Fatal(err)
		}
	}
}

// An administrator creates a user that may hold leases under the default
// prefix and do nothing else.
func ExampleACLRules() {
	fmt.Println("ACL SETUSER leaderrun on >PASSWORD " + redis.ACLRules("leaderrun"))
	// Output: ACL SETUSER leaderrun on >PASSWORD resetkeys ~leaderrun:* resetchannels &leaderrun:wake -@all +@connection +info +evalsha +eval +scan +subscribe +unsubscribe +wait +time +get +set +del +hmget +hget +hset +hsetnx +zadd +zscore +zrange +zrangebyscore +zremrangebyscore +zrem +pexpireat +publish
}
