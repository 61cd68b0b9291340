package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	_ "github.com/leaderrun/leaderrun/lease/sqlite"
)

// Importing the package registers the "sqlite" and "file" DSN schemes.
func Example() {
	dir, err := os.MkdirTemp("", "leaderrun-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	store, err := lease.Open(ctx, "sqlite:"+filepath.Join(dir, "leaderrun.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	rec, err := store.Acquire(ctx, "relay", "host-a", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Holder, rec.State())

	_, err = store.Acquire(ctx, "relay", "host-b", 15*time.Second)
	var held *lease.HeldError
	if errors.As(err, &held) {
		fmt.Println("refused; held by", held.Record.Holder)
	}

	if err := store.Release(ctx, "relay", "host-a", rec.Token); err != nil {
		log.Fatal(err)
	}
	next, err := store.Acquire(ctx, "relay", "host-b", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(next.Holder, next.State(), next.Token > rec.Token)
	// Output:
	// host-a held
	// refused; held by host-a
	// host-b held true
}
