package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/mysql"
)

// A replica opens the store, tries to take a name, and otherwise waits for
// the holder's expiry or a release, whichever is first.
func ExampleOpen() {
	ctx := context.Background()
	store, err := mysql.Open(ctx, "mysql://app:s3cret@db.internal:3306/app?tls=true")
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

// An administrator creates the tables and the fence procedure ahead of
// time for a user that may not create them: mysql app < schema.sql.
func ExampleSchemaSQL() {
	fmt.Println(strings.SplitN(mysql.SchemaSQL(), "\n", 2)[0])
	// Output: CREATE TABLE IF NOT EXISTS `leaderrun_leases` (
}
