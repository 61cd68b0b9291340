package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/postgres"
)

// A replica opens the store, tries to take a name, and otherwise waits for
// the holder's expiry or a release, whichever is first.
func ExampleOpen() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://app@db1,db2/app?target_session_attrs=read-write&leaderrun_schema=leaderrun")
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

// An administrator creates the objects ahead of time for a role that may
// not create them.
func ExampleSchemaSQL() {
	fmt.Println(strings.SplitN(postgres.SchemaSQL("leaderrun"), "\n", 2)[0])
	// Output: CREATE SCHEMA IF NOT EXISTS "leaderrun";
}
