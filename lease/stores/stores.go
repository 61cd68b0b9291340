// Package stores registers every lease store leaderrun ships with
// lease.Register, so that lease.Open knows their DSN schemes. Import it for
// its side effect, in one place per program.
//
// The etcd store (etcd.go) links gRPC and the etcd client, whose package
// initialisation costs about 4 MB of resident memory in every leaderrun
// process, whichever store it uses; build with -tags noetcd to leave it out.
// The Kubernetes store (kubernetes.go) links client-go's REST client
// (lease/kubernetes/doc.go has what it costs); -tags nokubernetes leaves it
// out. A build that leaves a store out says so when a DSN names it.
package stores

import (
	_ "github.com/leaderrun/leaderrun/lease/mysql"    // mysql://, mariadb://
	_ "github.com/leaderrun/leaderrun/lease/postgres" // postgres://, postgresql://
	_ "github.com/leaderrun/leaderrun/lease/redis"    // redis://, rediss://
	_ "github.com/leaderrun/leaderrun/lease/sqlite"   // sqlite:, file:
)
