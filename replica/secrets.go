package replica

import (
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
)

// ScrubCredentials blanks, in this process's environment, the variables
// that may hold the store's credentials: a child does not inherit them
// (childEnv drops leaderrun's own options besides), and /proc/PID/environ
// no longer shows them. Every command that opens a store calls it once the
// store has read them — the leader as much as status, watch and step-down,
// which can run for as long — having made itself non-dumpable first
// (environ.Hide).
//
// Only variables that the store's client library or leaderrun reads a
// secret from are scrubbed (a store names them, lease.Credentialed): pgx's
// PGPASSWORD, PGPASSFILE, PGSERVICEFILE, PGSSLPASSWORD and PGSSLKEY, and
// the variable an etcd DSN's password_env names. go-redis, the MySQL
// driver and etcd's client read none: REDISCLI_AUTH, MYSQL_PWD and
// ETCDCTL_PASSWORD are their command-line tools' and stay the command's.
func ScrubCredentials(store lease.Store) error {
	keys := []string{"LEADERRUN_STORE"}
	if c, ok := store.(lease.Credentialed); ok {
		keys = append(keys, c.CredentialEnv()...)
	}
	return environ.Scrub(keys...)
}
