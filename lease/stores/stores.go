// Package stores registers every lease store leaderrun ships with
// lease.Register, so that lease.Open knows their DSN schemes. Import it for
// its side effect, in one place per program.
//
// The etcd store (etcd.go) links gRPC and the etcd client, whose package
// initialisation costs about 4 MB of resident memory in every leaderrun
// process, whichever store it uses; build with -tags noetcd to leave it out.
// The Kubernetes store (kubernetes.go) links client-go's REST client,
// which adds about 5 MB to a process's resident memory and 9 MB to the
// binary (lease/kubernetes/doc.go has the numbers); it is built only with
// -tags kubernetes until its tests run against a real API server in CI.
package stores

import (
	_ "github.com/leaderrun/leaderrun/lease/mysql"    // mysql://, mariadb://
	_ "github.com/leaderrun/leaderrun/lease/postgres" // postgres://, postgresql://
	_ "github.com/leaderrun/leaderrun/lease/redis"    // redis://, rediss://
	_ "github.com/leaderrun/leaderrun/lease/sqlite"   // sqlite:, file:
)
