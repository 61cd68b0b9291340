package cmd

import (
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
)

// scrubCredentials blanks, in this process's environment, the variables
// that may hold the store's credentials: a child does not inherit them
// (childEnv drops leaderrun's own options besides), and /proc/PID/environ
// no longer shows them. Every command that opens a store calls it once the
// store has read them — the leader as much as status, watch and step-down,
// which can run for as long — having made itself non-dumpable first
// (environ.Hide).
func scrubCredentials(store lease.Store) error {
	keys := []string{"LEADERRUN_STORE"}
	if c, ok := store.(lease.Credentialed); ok {
		keys = append(keys, c.CredentialEnv()...)
	}
	return environ.Scrub(keys...)
}
