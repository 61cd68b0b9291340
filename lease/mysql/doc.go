// Package mysql is a lease.Store in InnoDB tables of a MySQL (8.0 or
// later) or MariaDB (10.6 or later) database, for replicas on many hosts.
// It registers the DSN schemes "mysql" and "mariadb".
//
// # Connecting
//
// The DSN is a URL, mysql://user:password@host:3306/database, over TCP
// (default port 3306); '@', '/', '?', '#', ':' and '%' in the password
// are %-encoded (a DSN with an '@' past its host is refused, without
// echoing it, since it is a password written unescaped). leaderrun has no
// parameters of its own; it passes these driver parameters on and refuses
// any other, and any given twice:
//
//   - tls=true|false|skip-verify: true verifies the server's certificate
//     against the system's roots and its name; skip-verify encrypts
//     without verifying. tls=preferred is refused, and so is
//     allowFallbackToPlaintext=true: the driver drops TLS, on a handshake
//     that does not offer it, in the configuration the whole pool shares.
//   - timeout, readTimeout, writeTimeout (durations); readTimeout and
//     writeTimeout do not apply to the sessions that block in GET_LOCK.
//   - allowCleartextPasswords, allowNativePasswords, allowOldPasswords,
//     allowFallbackToPlaintext, compress (booleans); connectionAttributes;
//     maxAllowedPacket.
//
// Every connection dials through TCP keepalive (5 s idle, 5 s interval, 3
// probes) and TCP_USER_TIMEOUT of 10 s, so a partitioned connection fails
// in seconds. Errors and Describe never contain the password. Errors that
// no retry can fix wrap lease.ErrRefused: a malformed DSN, a refused login
// (1045, 1698), an unknown database (1049), a missing privilege (1044,
// 1142, 1143, 1227, 1370), a read-only server or session (1290, 1792,
// 1836), binlog_format=STATEMENT (1665), and TLS the server does not offer
// or whose certificate does not verify. An unreachable server is a plain
// error.
//
// Every session runs in READ COMMITTED with time_zone '+00:00',
// innodb_lock_wait_timeout 5 and lock_wait_timeout 10.
//
// # Schema and privileges
//
// Open creates, unless they exist, the tables leaderrun_leases,
// leaderrun_tokens, leaderrun_candidates, leaderrun_groups and
// leaderrun_members and the procedures leaderrun_fence, leaderrun_renew and
// leaderrun_candidate in the DSN's database. It first only reads information_schema; if something is
// missing it takes a server-wide named lock (GET_LOCK) keyed by the
// database, so that replicas starting at once create everything once,
// reads again and creates what is still missing. A later version adds
// columns to an existing table with ALTER TABLE … ADD COLUMN, after
// checking that the table is leaderrun's (it has the columns leaderrun
// created it with and is InnoDB): a table of one of these names that is
// not is refused and never altered. A procedure's comment names its
// version ("leaderrun fence v2"); Open replaces an older version under the
// same named lock — on MariaDB with CREATE OR REPLACE, which keeps the
// privileges granted on it, on MySQL with DROP and CREATE, which drops
// them — and never a later version's. A procedure of one of these names
// that no version of leaderrun created is refused. The statements are
// SchemaSQL().
//
// A user that may not create them needs an administrator to run SchemaSQL
// in the database (again after an upgrade) and then grant:
//
//	GRANT SELECT, INSERT, UPDATE ON app.leaderrun_leases TO 'app'@'%';
//	GRANT SELECT, INSERT, UPDATE ON app.leaderrun_tokens TO 'app'@'%';
//	GRANT SELECT, INSERT, UPDATE ON app.leaderrun_candidates TO 'app'@'%';
//	GRANT SELECT, INSERT, UPDATE ON app.leaderrun_groups TO 'app'@'%';
//	GRANT SELECT, INSERT, UPDATE, DELETE ON app.leaderrun_members TO 'app'@'%';
//	GRANT EXECUTE ON PROCEDURE app.leaderrun_fence TO 'app'@'%';
//	GRANT EXECUTE ON PROCEDURE app.leaderrun_renew TO 'app'@'%';
//	GRANT EXECUTE ON PROCEDURE app.leaderrun_candidate TO 'app'@'%';
//
// (EXECUTE lets Open see that a procedure exists; leaderrun_renew and
// leaderrun_candidate run with the caller's rights.) Creating them takes
// CREATE, ALTER, CREATE ROUTINE and ALTER ROUTINE on the database. A
// replica never deletes lease rows (a withdrawn candidate's row is
// emptied, not deleted); member records that expired more than a lease
// duration ago are, when a member joins. Forget, an operator's deletion of
// a free name, also takes DELETE on the leases, tokens and candidates
// tables.
//
// # Statements and the clock
//
// The server's clock decides expiry: every statement compares and writes
// UTC_TIMESTAMP(6), microseconds in UTC, which does not depend on any
// session's time zone; DATETIME(6) columns hold UTC. Each operation is one
// statement or one transaction:
//
//   - Acquire: first a CALL of leaderrun_candidate, which records the
//     holder as a candidate and reads the row and the server's clock; a
//     row that keeps the holder out is refused from that read (1
//     statement). A name that looked free is granted as Seize grants it.
//   - Seize, and Acquire's grant: one transaction that locks the lease
//     row (SELECT … FOR UPDATE, reading the server's clock), decides in Go
//     from that row and clock reading, and then either records the refused
//     holder as a candidate, or raises the name's token in
//     leaderrun_tokens (token = max(previous + 1, clock in ms), returned
//     through LAST_INSERT_ID), writes the lease row and raises its
//     version. 5 statements for a grant (6 for a name's first), 4 for a
//     refusal.
//   - Renew: a CALL of leaderrun_renew, one statement and one round trip,
//     which runs START TRANSACTION, an UPDATE guarded by holder, token, not
//     released and not expired, a SELECT of the row and COMMIT on the
//     server: MySQL has no UPDATE … RETURNING, and the transaction keeps
//     the row as the UPDATE left it until the SELECT has read it.
//   - Release and Annotate: one multi-table UPDATE with the same guard,
//     which also raises the versions of the row and, for a partition, of
//     its group.
//   - RequestStepDown: one transaction (lock the row, check the candidate
//     or, for a partition, the member, update), then the bell (see
//     Wake-ups): 2 statements more.
//   - Join, RenewMember, Leave: one transaction each; RenewMember is START
//     TRANSACTION, an UPDATE of the member record, one UPDATE of every
//     claimed partition lease, the group's SELECT, COMMIT — 5 statements
//     whatever the number of claims.
//   - Get, List, GetGroup: one SELECT.
//
// A transaction InnoDB rolled back for a deadlock, or a first insert of a
// name that lost a race, is run again; a failed COMMIT is not (its outcome
// is unknown, and is reported as an error).
//
// Tokens live in leaderrun_tokens, which nothing deletes: a grant after
// the lease row was deleted continues from the last token, even when that
// token is ahead of the clock.
//
// # Wake-ups
//
// The holder of a tenure holds a named lock, GET_LOCK(name, 0), keyed by
// the database, the lease name, the token and the record's Where, on one
// session its Store keeps for all of its tenures: taken before the grant
// commits, released (RELEASE_LOCK) after the release commits. A follower's
// Wait runs one statement on a session of its own that reads the row and,
// if it still shows the tenure the follower saw, blocks in GET_LOCK on
// that tenure's lock, so that a release — or the death of the holder's
// session, which frees its locks — wakes it within a round trip. A
// follower that gets the lock releases it in the same statement: the lock
// only wakes, the row decides. Keying the lock by the token means a
// session that still holds an old tenure's lock (a partitioned holder the
// server has not noticed) never keeps a later tenure's waiters asleep.
// Annotate takes the lock of the new Where before its UPDATE commits and
// releases the old one after: a waiter that reads the new Where finds its
// lock held, a waiter blocked on the old lock wakes, and one that read the
// old Where and had not blocked yet finds its lock free and reads again. The
// holder's session is pinged every 10 s and, when it broke, replaced, and
// its locks taken again.
//
// A step-down request changes nothing a lock signals. The holder's own
// Wait on its tenure (how a leader learns of a request at once) holds a
// second named lock, the tenure's bell, while it blocks; RequestStepDown,
// after its commit, finds the session that holds the bell (IS_USED_LOCK)
// and interrupts its wait (KILL QUERY), which needs no privilege when the
// requester connects as the same user. Otherwise the holder learns of the
// request from its next renewal. Followers blocked on the tenure's lock
// learn of the request from the release that follows it.
//
// The one change neither signals is a takeover by another holder after
// the expiry while the old holder's session lives on (a holder that stopped
// renewing but did not die or release). It cannot come before the expiry,
// so while anyone waits on a lock, the Store reads the names it waits on
// (one indexed statement for all of them) at the tenure's expiry + 500 ms,
// and every 2 s while it stays expired; followers whose Wait ends at the
// expiry never need it, and the holder's own Wait does not poll (its
// Store gives the lock up when a renewal or release finds the tenure
// lost). Waits without a lock to block on — a name nobody holds, a holder
// whose lock session is broken, a Wait beyond the 8 sessions a Store
// blocks in GET_LOCK at once — and every WaitGroup are woken by that read
// every 250 ms; groups raise a version in their row on every change, in
// the same transaction. MySQL has no notification a client can wait on for
// many keys, so this one poll is the bound for what the locks do not
// signal.
//
// At default timings one leader and two followers send the server under
// one statement per second: the leader a CALL per renewal (every 2 s) and
// a Wait and a read per minute; each follower, once per lease duration, a
// CALL (refused) and a Wait statement. (A CALL is one statement for the
// client and the server's Questions counter; the server runs the
// procedure's statements inside it.)
//
// A Store uses up to 8 connections for statements, one lock session
// from its first attempt at a grant on, and up to 8 sessions blocked in
// GET_LOCK.
//
// # Fencing a child's writes in the same database
//
// A child whose data lives in the same server can make its writes
// conditional on its tenure. As the first statement of the transaction
// that writes, it calls
//
//	START TRANSACTION;
//	CALL leaderrun_fence('relay', 42);  -- $LEADERRUN_NAME, $LEADERRUN_TOKEN
//	UPDATE accounts SET … ;
//	COMMIT;
//
// leaderrun_fence signals SQLSTATE LR001 (FenceSQLState, error 1644)
// unless 42 is the current, unreleased and unexpired token of "relay" at
// the call; the message never shows the current token. A child treats
// LR001 as "stop: no longer the leader" and rolls back. It checks the
// token first with a read that locks nothing, so a refused call — a wrong,
// stale, released or expired token — leaves nothing locked, and a caller
// without the token cannot hold up a takeover. On success it holds a
// shared lock on the name's row of leaderrun_tokens until the transaction
// ends (taken after that read, and the token checked again against the
// locked row: a grant that committed in between is refused, though its
// row then stays share-locked until the caller's transaction ends). A grant must raise that row's token, so it waits until
// every such transaction has ended: no new tenure is granted while a
// fenced write is in flight, and the child's writes commit before any
// successor's. Renewals, releases and step-down requests write only the
// lease row, which fence reads without locking, and are not blocked. A
// grant waits at most innodb_lock_wait_timeout (5 s), then fails, and the
// follower tries again: keep fenced transactions short. A tenure asked to
// step down stays current for fence until it is released.
//
// Call it first: in REPEATABLE READ (the default), the lease row is read
// from the transaction's snapshot, which the first read fixes. The token
// check against the tokens row always sees the latest grant (a locking
// read), but a release committed after an earlier read in the same
// transaction would go unnoticed (a successor still waits for the
// transaction), and a token that the old snapshot shows current but a
// later grant replaced is refused only after the lock is taken. In
// SERIALIZABLE, InnoDB turns fence's read of the lease row into a shared
// lock, which makes the leader's renewals wait for the transaction: use
// READ COMMITTED or REPEATABLE READ for fenced transactions.
//
// leaderrun_fence runs with its definer's rights (SQL SECURITY DEFINER): a
// child's user needs only
//
//	GRANT EXECUTE ON PROCEDURE app.leaderrun_fence TO 'child'@'%';
//
// # Replication
//
// The guarantees hold on one primary. Named locks, and InnoDB's row locks
// that fence relies on, are local to a server: on Galera or Group
// Replication with several writable nodes, point every replica and child
// at the same node. After an asynchronous replica is promoted, the last
// grants may be lost: the token rule keeps tokens increasing (the clock
// floor), but a holder whose grant was lost can overlap with a new one
// until its renew deadline, and only fencing in the resources the children
// write protects.
package mysql
