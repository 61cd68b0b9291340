// Package redis is a lease.Store in a Redis server, for replicas whose only
// shared service is Redis. It registers the DSN schemes "redis" and
// "rediss" (TLS).
//
// # Connecting
//
// The DSN is a URL as go-redis's ParseURL reads it:
// redis://[user:password@]host:port/db, with its query parameters
// (dial_timeout, read_timeout, skip_verify, …). A password containing @, :,
// / or ? must be percent-encoded. leaderrun reads two parameters of its
// own and removes them before go-redis sees the DSN:
//
//   - leaderrun_prefix=P: every key starts with "P:" and the wake-up
//     channel is "P:wake" (default "leaderrun"; letters, digits and . _ : -).
//   - leaderrun_wait_replicas=N: after a grant or a renewal, WAIT until N
//     replicas acknowledged it; if they do not in time, the operation
//     returns an error (its outcome is then unknown, so it is not trusted).
//
// A parameter given twice is refused. Every connection uses
// internal/tcpdial (keepalive, TCP_USER_TIMEOUT of 10 s; TLS negotiated on
// top for rediss://), honours the caller's context deadline, and go-redis
// does not retry on its own: the election retries, knowing that an unknown
// outcome is not a success. Without a deadline a command times out after
// read_timeout (go-redis's default, 5 s). Errors and Describe never
// contain the password. Errors that no retry can fix wrap lease.ErrRefused:
// a malformed DSN, refused credentials (WRONGPASS, NOAUTH), a missing ACL
// permission (NOPERM), an unknown database, a read-only replica, and a
// memory limit with an allkeys-* eviction policy, which could evict a held
// lease. An unreachable server is a plain error.
//
// # Keys and scripts
//
// Under the prefix P, each name has a lease record P:lease:{NAME} (a hash
// without expiry: the record's own expiry field, on the server's clock,
// decides), its last token P:token:{NAME} (never expires) and its
// candidates P:cand:{NAME} (a sorted set that expires with its last
// entry), with what they said when they campaigned (lease.Candidacy) in
// P:cattr:{NAME}, a sorted set beside it scored alike, which a leaderrun
// that knows nothing of it leaves alone. A group has P:group:{GROUP} (its
// number of partitions) and P:members:{GROUP} (a sorted set of identities
// by expiry); its partitions
// are lease records named by lease.PartitionKey, P:lease:{GROUP} #3. The
// braces are Redis Cluster hash tags, so that every script's keys share a
// slot, but the store connects to one server and does not follow cluster
// redirections.
//
// Every operation is one Lua script run with EVALSHA (EVAL when the server
// does not have it, as after a restart), which reads the server's clock
// with TIME and decides with it: Acquire grants a name that is absent,
// released or expired and not reserved against the caller, with token =
// max(last token + 1, TIME in milliseconds), or records the caller as a
// candidate; Renew, Annotate and Release check holder, token, not released
// and not expired; RequestStepDown checks the holder and the successor's
// candidacy or, for a partition, its membership of the group. A member's
// renewal round (RenewMember) is one script whatever the number of claims.
// Lease records and tokens never expire, so that an eviction policy
// limited to keys with a TTL (volatile-*) never touches them.
//
// # Wake-ups
//
// Acquire, Seize, Release, RequestStepDown and Annotate publish the name,
// and Join (adding a member) and Leave the group's name, on P:wake from
// inside their scripts; a renewal publishes nothing. Each Store holds one
// subscription (started by the first Wait): Wait registers with it, reads
// the record once the SUBSCRIBE is confirmed, and then sleeps until its
// name (or, for a group, a partition of it) is published, its timeout
// (the elector passes the expiry it read), or Close. Pub/Sub loses what is
// published while a subscription is down, so every confirmation of a
// (re)subscription makes the waiters read again, and while it is down
// they poll every 500 ms. A subscription silent for 3 s is sent a PING,
// and one that stays silent for 3 s more is replaced.
//
// # Permissions
//
// A Redis ACL user needs the rules ACLRules(prefix) returns: the keys and
// the channel under the prefix, the connection commands, INFO, EVALSHA,
// EVAL, SCAN, SUBSCRIBE, WAIT, and the commands the scripts run.
//
// # What Redis cannot promise
//
// A single Redis primary is a single point of failure: while it is down,
// nobody leads. With replicas, replication is asynchronous: a failover can
// lose a grant or a renewal the old primary acknowledged, and then a second
// holder is granted the name while the first still trusts its tenure. Only
// fencing protects then (tokens still increase: the new primary's clock
// floor is past the lost grant's token, as long as its clock is not behind
// the old one's). leaderrun_wait_replicas narrows that window but does not
// close it: the replica that acknowledged may not be the one promoted, and
// a write that timed out waiting may still have been applied. Expiry
// follows the server's clock, so a server whose clock is stepped forward
// expires leases early. A server that restarts without persistence
// forgets every record and counter: holders find their lease lost at the
// next renewal, and tokens rest on the clock floor alone.
package redis
