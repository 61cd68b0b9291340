package cmd

import (
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
)

// Every command that opens a store — the leader as much as status, watch
// and step-down, which can run for as long — keeps the store's credentials
// from other processes of its user: it is made non-dumpable before it reads
// them (environ.Hide) and blanks them in its environment once the store has
// read them (scrubCredentials).

// scrubCredentials blanks, in this process's environment, the variables
// that may hold the store's credentials: a child does not inherit them
// (childEnv drops leaderrun's own options besides), and /proc/PID/environ
// no longer shows them.
func scrubCredentials(store lease.Store) error {
	keys := []string{"LEADERRUN_STORE"}
	if c, ok := store.(lease.Credentialed); ok {
		keys = append(keys, c.CredentialEnv()...)
	}
	return environ.Scrub(keys...)
}
