// Package chaos is leaderrun's fault-injection suite. It has no API; its
// tests build the leaderrun binary, start three replicas per store (SQLite
// and PostgreSQL) that supervise a recording child, inject faults at random
// moments, and check the children's logs against docs/design.md §1:
//
//   - no two tenures' processes (child and every descendant) run at once,
//     except when a supervisor was frozen (SIGSTOP) past its deadline;
//     then the stale child's fenced writes must be refused;
//   - tokens strictly increase in start order;
//   - no process outlives its run;
//   - after every fault a new child starts within the TTL plus a bound;
//   - every replica exits with the documented status.
//
// Faults: SIGKILL, SIGTERM (then restart) and SIGSTOP past the TTL (then
// SIGCONT) of the leader's leaderrun; on PostgreSQL, the leader's
// connections reset or blackholed by its own TCP proxy, then healed; each
// optionally with a child that ignores SIGTERM or that starts a grandchild
// escaping its process group with setsid.
//
// Short mode (CI, under three minutes):
//
//	go test ./chaos
//
// Long mode, N rounds per store:
//
//	go test ./chaos -timeout 0 -chaos.rounds=150 -v
//	LEADERRUN_CHAOS=long go test ./chaos -timeout 0 -v
//
// Other flags: -chaos.seed (reproduce a schedule), -chaos.store=sqlite or
// postgres, -chaos.bin (a prebuilt leaderrun instead of building one),
// -chaos.keep (keep the run directories), -chaos.bound (slack over the TTL
// allowed for a new leader), -chaos.strict (fail on known defects too).
// PostgreSQL is the server of package internal/pgtest; without it the
// postgres half skips, or fails when CI is set.
package chaos
