package cmd

import (
	"fmt"
	"os"

	"github.com/leaderrun/leaderrun/lease/sqlite"
	// The stores leaderrun can use register their DSN schemes with
	// package lease when imported.
	_ "github.com/leaderrun/leaderrun/lease/stores"
)

// defaultStoreText names the store used without --store, in --help.
const defaultStoreText = "this user's SQLite file on this host"

// defaultStore is the store used without --store: a SQLite file of this
// user's (sqlite.DefaultPath), so only processes of this user on this host
// take part in its elections.
func defaultStore() (dsn, path string) {
	path = sqlite.DefaultPath()
	return "sqlite:" + path, path
}

// defaultStoreError is err, from opening the default store, with what to
// do about it: the file is this user's, so another user's replicas never
// share it, and a user who cannot write its directory must name a store.
func defaultStoreError(err error) error {
	return fmt.Errorf("%w (the default store is this user's, uid %d: pass --store sqlite:PATH with a file every replica can write, or another store)",
		err, os.Geteuid())
}
