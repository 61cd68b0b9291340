// Package stores registers every lease store leaderrun ships with
// lease.Register, so that lease.Open knows their DSN schemes. Import it for
// its side effect, in one place per program.
package stores

import (
	_ "github.com/leaderrun/leaderrun/lease/mysql"    // mysql://, mariadb://
	_ "github.com/leaderrun/leaderrun/lease/postgres" // postgres://, postgresql://
	_ "github.com/leaderrun/leaderrun/lease/redis"    // redis://, rediss://
	_ "github.com/leaderrun/leaderrun/lease/sqlite"   // sqlite:, file:
)
