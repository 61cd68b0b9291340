// Package postgres is a lease.Store in a PostgreSQL table, for replicas on
// many hosts. It registers the DSN schemes "postgres" and "postgresql".
//
// # Connecting
//
// The DSN is anything pgx accepts: a postgres:// URL (several hosts with
// target_session_attrs=read-write follow a primary failover: the statement
// in flight fails, the next connection finds the new primary) or
// keyword/value pairs; PG* environment variables and the passfile fill in
// what it omits. leaderrun reads two URL query parameters of its own and
// removes them before pgx sees the DSN:
//
//   - leaderrun_schema=NAME: the schema of the lease table (default
//     "leaderrun"; letters, digits and underscores).
//   - leaderrun_listen=off: no LISTEN/NOTIFY, for PgBouncer in transaction
//     mode. Followers then poll the lease row every 500 ms, and pgx uses
//     the exec query mode unless the DSN sets default_query_exec_mode.
//
// Every connection has TCP keepalive (5 s idle, 5 s interval, 3 probes) and
// TCP_USER_TIMEOUT of 10 s, so a partitioned connection fails in seconds.
// Errors and Describe never contain the password. Errors that no retry can
// fix wrap lease.ErrRefused: a malformed DSN, a refused login (SQLSTATE
// class 28), an unknown database (3D000), a missing privilege (42501) and a
// read-only session (25006). An unreachable server is a plain error.
//
// # Schema and privileges
//
// Open creates, unless they exist, the schema, the tables SCHEMA.leases,
// SCHEMA.candidates, SCHEMA.groups and SCHEMA.members and the function
// SCHEMA.fence, serialized by an advisory lock so that many replicas may
// start at once. The statements are SchemaSQL(schema); they also add the
// columns a newer version needs to a table an older one created, which
// takes the table's owner. A role that may not create or alter them needs
// an administrator to run SchemaSQL (again after an upgrade) and then
// GrantSQL(schema, role):
//
//	GRANT USAGE ON SCHEMA leaderrun TO app;
//	GRANT SELECT, INSERT, UPDATE ON leaderrun.leases, leaderrun.groups TO app;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON leaderrun.candidates, leaderrun.members TO app;
//
// The role then needs no CREATE privilege. A replica never deletes lease
// or group rows; candidates and members that expired or withdrew it does.
// Forget, an operator's deletion of a free name, also takes DELETE on
// SCHEMA.leases, which GrantSQL leaves to the administrator.
//
// # Statements
//
// Each operation is one statement in its own READ COMMITTED transaction,
// timed by the database's clock (now(), the statement's start): Acquire is
// UPDATE … WHERE released OR expired, with token = greatest(previous + 1,
// clock_timestamp() in milliseconds), or for a name without a row INSERT …
// ON CONFLICT (name) DO NOTHING; Renew and Release are UPDATEs guarded by
// holder, token, not released and not expired. Acquire also refuses a name
// a step-down reservation keeps from the caller, and records the caller in
// candidates (seen until now + 2×ttl) when its row there has less than
// 1.5×ttl left, in the same statement, through data-modifying CTEs. A
// refused Acquire so writes nothing and locks nothing (an INSERT … ON
// CONFLICT DO UPDATE would lock the row even when its WHERE refuses): it
// does not wait for a child's fenced transaction, and costs the server no
// transaction id and no WAL flush.
// RequestStepDown is an UPDATE guarded by "held, not by the successor, and
// the successor a live candidate or, for a partition, a live member of its
// group". Acquire, Release and RequestStepDown
// notify the channel "leaderrun.SCHEMA" with the lease name as payload in
// the same statement; Renew does not. Record.Remaining and Record.Reserved
// are computed by the database.
//
// Every commit waits for its WAL flush (and synchronous standbys) as the
// server's synchronous_commit says, except Release's: it sets
// synchronous_commit off for its own transaction, so that the release is
// visible and waiters are notified without waiting for the disk. A server
// crash (or a failover) in the fraction of a second before the WAL writer
// flushes it can undo the release; the name is then held until it expires,
// as after a release that failed. A grant always waits: an Acquire that
// sees the release commits synchronously, flushing the release with it.
//
// # Fencing a child's writes in the same database
//
// A child whose data lives in the same PostgreSQL can make its writes
// conditional on its tenure. Inside the transaction that writes, before
// the writes, it calls
//
//	BEGIN;
//	SELECT leaderrun.fence('relay', 42);  -- $LEADERRUN_NAME, $LEADERRUN_TOKEN
//	UPDATE accounts SET … ;
//	COMMIT;
//
// fence raises SQLSTATE LR001 (FenceSQLState) unless 42 is the current,
// unreleased and unexpired token of "relay" at the moment of the call
// (clock_timestamp(), not the transaction's start). A child treats LR001 as
// "stop: no longer the leader" and rolls back. On success fence holds a
// FOR KEY SHARE lock on the lease row until the transaction ends. Because
// UNIQUE (name, token) makes token a key column, an Acquire, which changes
// the token, must lock the row FOR UPDATE and waits until every such
// transaction has ended: no new tenure is granted while a fenced write is
// in flight, so the child's writes commit before any successor's. A Renew
// or Release (or RequestStepDown) changes no key column, takes FOR NO KEY
// UPDATE, which does not conflict with FOR KEY SHARE, and is not blocked. A
// tenure asked to step down stays current for fence until it is released. Keep fenced transactions
// short: followers' Acquire attempts wait for them too.
//
// fence is SECURITY DEFINER and executable only by its owner until granted:
//
//	GRANT USAGE ON SCHEMA leaderrun TO child;
//	GRANT EXECUTE ON FUNCTION leaderrun.fence(text, bigint) TO child;
//
// In a REPEATABLE READ or SERIALIZABLE transaction, fence may instead fail
// with 40001 (serialization_failure) when the lease row changed since the
// transaction's snapshot; that too means "retry or stop", never "proceed".
package postgres
