package replica

import (
	"fmt"
	"os"

	"github.com/leaderrun/leaderrun/lease/sqlite"
)

// DefaultStore is the store used without --store: a SQLite file of this
// user's (sqlite.DefaultPath), so only processes of this user on this host
// take part in its elections.
func DefaultStore() (dsn, path string) {
	path = sqlite.DefaultPath()
	return "sqlite:" + path, path
}

// DefaultStoreError is err, from opening the default store, with what to
// do about it: the file is this user's, so another user's replicas never
// share it, and a user who cannot write its directory must name a store.
func DefaultStoreError(err error) error {
	return fmt.Errorf("%w (the default store is this user's, uid %d: pass --store sqlite:PATH with a file every replica can write, or another store)",
		err, os.Geteuid())
}
