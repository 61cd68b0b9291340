// Package etcd is a lease.Store in an etcd cluster, for replicas on many
// hosts that already run etcd (or outgrow one database). It registers the
// DSN schemes "etcd" and "etcds" (TLS).
//
// # Connecting
//
//	etcd://[user[:password]@]host[:port][,host[:port]…][/prefix][?param=value&…]
//	etcds://…  (TLS)
//
// A host without a port uses 2379. The prefix (default "leaderrun";
// letters, digits, '.', '_' and '-' in segments separated by '/') keeps
// leaderrun's keys apart from everything else in the cluster: all of them
// live under "prefix/". The user information ends at the DSN's last '@', so
// a password may contain '@', ':' and '/'; a parameter value must then
// write '@' as %40. Parameters (an unknown or repeated one is refused):
//
//   - cacert=PATH: the CA bundle that signs the servers' certificates
//     (etcds only; default the system's roots).
//   - cert=PATH and key=PATH: a client certificate and its key (etcds
//     only), for clusters started with --client-cert-auth.
//   - password_file=PATH: the user's password is the file's content (less
//     a trailing newline), rather than written in the DSN.
//   - password_env=NAME: the user's password is the environment variable
//     NAME.
//
// A user needs a password from exactly one of the three places. Errors and
// Describe never contain it; a DSN with a password in it that does not
// parse is not quoted at all. Connections use TCP keepalive and
// TCP_USER_TIMEOUT (package internal/tcpdial) and gRPC keepalive pings
// every 10 s, so that a partitioned connection fails in seconds. Open
// checks, in one transaction whose condition never holds, that the user
// may read and write the prefix; over TLS it also probes the certificates
// itself, since gRPC reports a refused certificate only as a timeout. A
// malformed DSN, unreadable TLS files, a certificate either side refuses,
// a refused password and a missing permission are errors that wrap
// lease.ErrRefused; an unreachable cluster is a plain error.
//
// With authentication on, the user's role needs readwrite on the prefix:
//
//	etcdctl role add leaderrun
//	etcdctl role grant-permission leaderrun --prefix=true readwrite leaderrun/
//	etcdctl user add app
//	etcdctl user grant-role app leaderrun
//
// # Keys and protocol
//
// Per name N (a group's partitions live under the group; see keys.go):
// prefix/n/N/record holds the record as JSON without an etcd lease —
// holder, token, acquisition time, step-down request and Where — and so
// the last token; prefix/n/N/lease holds "TOKEN HOLDER" and is attached to
// the tenure's etcd lease, so that it exists exactly while the tenure
// lives; prefix/n/N/released holds the token of a tenure its holder
// released, which tells "released" from "expired"; prefix/c/N/HOLDER
// records a candidate (its seen-until in ms, as every version wrote it)
// and prefix/a/N/HOLDER, written with it by Campaign, what it said of
// itself (lease.Candidacy, JSON). A refusal rewrites the candidate key
// alone and so keeps those attributes; they count only while the
// candidate key has existed since they were written (a leaderrun that
// knows nothing of them may have swept the candidate and recorded it
// again), and a grant sweeps them with ended candidates. A refusal leaves
// a candidate key that is still lease.Candidate.Fresh as it is: a
// follower woken by a change of hands then writes nothing while the new
// leader's command starts.
//
//   - Acquire and Seize decide on the name's keys and write the grant in
//     one transaction whose conditions (ModRevision compares) say that the
//     record and the lease key are as the decision saw them, so that the
//     decision holds at the moment of the write; when they changed, the
//     transaction's other branch returns them and it decides again. The
//     name is free when its lease key is absent (released, expired, or
//     never held) and no step-down reservation keeps the caller out; Seize
//     also when the lease key names the dead holder's tenure. The first
//     decision is on what the handle last learned of the name — a read,
//     its own writes, the events of its Wait's watch — when that says the
//     name is free (a follower woken by a release: the watch showed the
//     lease key's deletion). When that says the name is held (a follower
//     whose Wait timed out), one transaction records the candidate and
//     reads the keys while the tenure's etcd lease is asked how long it
//     has left: a refusal is one round trip and needs no lease of the
//     caller's own. Otherwise it reads first. The grant writes the record
//     with token = max(previous + 1, the acquiring replica's wall clock in
//     ms), the lease key on the tenure's etcd lease, and deletes the
//     released key. The etcd lease, with the TTL rounded up
//     to whole seconds, is renewed or granted after the call was sent: the
//     spare lease that an earlier Acquire of the handle got and did not
//     use is kept alive while the transaction runs, unless it has expired
//     by the local clock; else a new one is granted (while the name is
//     read, when it is). A hand-off is then one round trip and one raft
//     write with a live spare (a follower that was refused less than L
//     ago), two without.
//   - Renew is one LeaseKeepAlive of the tenure's etcd lease. While a
//     watch of the name's keys is in place and has read them (the
//     holder's own Wait for a step-down request, which the election loop
//     keeps), that watch vouches for the keys: every change after its read
//     reaches the handle, so it knows that the lease key still stands for
//     this tenure on that lease, and whether a step-down was asked.
//     Without such a watch, one linearizable read of the name's keys is
//     sent at the same time as the keep-alive and confirms it. Neither
//     needs an order with the keep-alive: the lease key is attached to the
//     lease, so while the lease lives only an explicit delete — the
//     holder's own release, an operator — can remove it, and a takeover
//     needs it removed. A keep-alive of an expired lease fails (etcd never
//     revives one): ErrLost. One renewal is one request (two without the
//     watch) in one round trip, and no raft write.
//   - Release is one transaction: if the lease key still names this
//     tenure, delete it and write the released key. The tenure's own etcd
//     lease, which no key uses any more, is then revoked in the
//     background (Close waits for it). A step-down reservation lives in
//     the record and so outlives the release.
//   - Forget deletes every key of the name, its candidates and their
//     attributes in one transaction conditional on the record and lease
//     key being as read, when lease.Forgettable allows it.
//   - RequestStepDown and Annotate rewrite the record in a transaction
//     conditional on the record and lease key being as read, and for
//     RequestStepDown on the successor's candidate key or, for a
//     partition, its member key.
//   - Wait watches the name's keys, reads them once etcd confirmed the
//     watch (unless the handle knows them as of the revision the watch
//     starts from: nothing was written to etcd since, as after a
//     refusal), and returns on the next change: an acquisition, a
//     release, a step-down, Annotate, or the deletion of the lease key
//     when the tenure expired. Renewals write no key and wake nobody.
//     After a watch error, ErrCompacted included, it watches and reads
//     again.
//
// # Groups
//
// A group's keys are prefix/g/G/n (the number of partitions, no lease),
// prefix/g/G/m/MEMBER (attached to the member's etcd lease) and each
// partition's keys under prefix/g/G/p/P/. A partition is granted on a
// lease of its own, like a name, and the member's next renewal round
// attaches every claimed partition still held with the claim's token to
// the member's etcd lease (and revokes the lease it was granted on): so
// one LeaseKeepAlive renews the member and all of its partitions, a grant
// whose answer the member never got (and so never claims) expires after
// its TTL, and when the member stops renewing they all expire
// together, which is what the owner's step-out expects. A round is that
// keep-alive and, in parallel, one transaction that rewrites the member
// record (its wall-clock "until"), re-attaches claims that are on another
// lease, and reads the group: one round trip and one raft write, whatever
// the number of partitions, plus one LeaseTimeToLive per held partition
// on a lease that no live member shares (none in the steady state). When
// the member's lease expired, the round grants a new one; partitions that
// were on the old lease stay lost.
//
// # Clocks, and what is not promised
//
// etcd's leader decides when a tenure ends: an etcd lease expires by its
// clock, and etcd deletes the lease key up to about 0.5 s later (its
// revocation loop), so a name becomes free up to 1 s (rounding) plus
// 0.6 s after the last renewal plus L. A new etcd leader extends every
// lease (etcd refreshes them on election), so an etcd leader change only
// makes tenures last longer, which is safe. etcd raises a lease's TTL to
// at least 1.5 election timeouts (2 s with the default 1 s).
//
// etcd has no clock a transaction can read. What needs a clock finer than
// whole seconds therefore uses the replicas' wall clocks: the token's
// clock floor (the acquiring replica's; the previous token + 1 still
// applies, so tokens strictly increase while the record exists — and the
// record lives in etcd's replicated log, which loses no acknowledged write
// while a majority of members keeps its disk), a step-down reservation's
// window and a candidate's 2×ttl (the writer's clock, read by another
// replica's), and group membership (a member is live while its key exists
// and the "until" its last round wrote has not passed on the reader's
// clock). Keep the replicas' clocks within a second or so (NTP); skew
// shifts reservations and membership, never who holds a name.
//
// Record.Remaining is an upper bound: the etcd lease's whole seconds left
// as etcd reports them (LeaseTimeToLive, one request per distinct lease in
// Get, List and GetGroup; known without a request right after a grant or
// renewal), plus the fraction it does not report and the revocation delay.
// Record.Renewed is estimated from the same answer; Record.Expires of a
// released or expired tenure is not known (zero).
package etcd
