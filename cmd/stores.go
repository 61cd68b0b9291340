package cmd

// The stores leaderrun can use register their DSN schemes with package
// lease when imported.
import _ "github.com/leaderrun/leaderrun/lease/stores"

// defaultStoreText names the store used without --store (see
// replica.DefaultStore), in --help.
const defaultStoreText = "this user's SQLite file on this host"
