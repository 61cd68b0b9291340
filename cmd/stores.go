package cmd

// The stores leaderrun can use register their DSN schemes with package
// lease when imported.
import _ "github.com/leaderrun/leaderrun/lease/stores"
