// Package chaos is leaderrun's fault-injection suite. It has no API; its
// tests build the leaderrun binary, start three replicas per store that
// supervise a recording child — campaigning for one name, and, in a second
// run per store, sharing the partitions of one name (--partitions N) — inject
// faults at random moments, and check the children's logs against
// docs/design.md §1 and, partitioned, §9 — for the one name, and for every
// partition on its own:
//
//   - no two tenures' processes (child and every descendant) run at once,
//     except when a supervisor was frozen (SIGSTOP) past its deadline;
//     then the stale child's fenced writes must be refused. Children of
//     different partitions may run at once;
//   - tokens strictly increase in start order;
//   - no process outlives its run, and no child ends unless it is stopped
//     (one partition's stop never kills another's processes);
//   - after every fault a new child starts within the TTL (plus,
//     partitioned, the reconcile interval) plus a bound, and no name or
//     partition ever goes longer than that without a child;
//   - every replica exits with the documented status.
//
// Stores: SQLite, PostgreSQL, MySQL (MariaDB), Redis and etcd (a
// three-member cluster of the run's own), and the
// Kubernetes Lease store (k8s: a kube-apiserver and its etcd of the run's
// own, package internal/testenv/kubetest), each networked one reached through a
// TCP proxy per replica (per member, on etcd). Children write through the
// store's fence on PostgreSQL and MySQL, and beat elsewhere.
//
// Faults, aimed at the leader's replica (partitioned: at a replica that
// holds partitions, hitting every partition it holds): SIGKILL and SIGTERM
// of its leaderrun, then a restart (a join, partitioned); SIGSTOP past the
// TTL, then SIGCONT; on networked stores, its connections reset or
// blackholed by its proxies, then healed, and its sessions ended by the
// server (pg_terminate_backend, KILL CONNECTION, CLIENT KILL); on etcd,
// etcd's own leader killed and restarted; on k8s, the kube-apiserver, or
// its etcd, SIGKILLed and started again. Those last are outages of the
// whole store: they hit every replica, and the bound for a new child
// counts from when the store serves again. The children hit are optionally
// armed to ignore SIGTERM or to start a grandchild escaping their process
// group with setsid (partitioned: a random subset of them).
//
// Beside the faults, the replicas of the one-name runs carry a health
// check that fails at random (-chaos.health-flap, a fifth of the checks by
// default, every 300 ms, 2 retries): an unhealthy leader hands the name
// over, or restarts its command when no eligible standby is left, and the
// same checks hold through it. A tenure that a transient fault (ended
// sessions, an outage) left alone and that such a hand-over ended later
// counts as kept: the new child that follows answers to the bound on time
// without a child, not to the bound that counts from the fault.
//
// Short mode (CI, about a minute for the package; every store, one name and
// partitioned, at once):
//
//	go test ./chaos
//
// Long mode, N faults per run:
//
//	go test ./chaos -timeout 0 -chaos.rounds=150 -v
//	LEADERRUN_CHAOS=long go test ./chaos -timeout 0 -v
//	go test ./chaos -timeout 0 -v -run 'TestChaos/^partitioned-postgres$' -chaos.rounds=300 -chaos.partitions=6
//
// On the Kubernetes store alone (make test-kube runs its short mode; make
// test leaves it to that, setting LEADERRUN_TEST_KUBE_SKIP):
//
//	go test ./chaos -v -run 'TestChaos/(^k8s$|^partitioned-k8s$)'
//
// Other flags: -chaos.seed (reproduce a schedule and partition count),
// -chaos.store=sqlite,postgres,mysql,redis,etcd,k8s (the default: every
// store of the build), -chaos.partitions (N for the partitioned runs; -1:
// none), -chaos.bin (a prebuilt leaderrun instead of building one),
// -chaos.keep (keep the run directories), -chaos.bound (slack over the TTL
// allowed for a new child), -chaos.strict (fail on known defects too),
// -chaos.parallel (runs at once, 2 by default). Each server is that of
// package internal/testenv/pgtest, mysqltest, redistest, etcdtest or kubetest;
// without it that store's runs skip, or fail when CI is set (or, for k8s,
// LEADERRUN_TEST_KUBE_REQUIRED).
package chaos
