// Package sqlite is a lease.Store kept in an SQLite database file, for
// processes on one host.
//
// Every process that opens the same file takes part in one election per
// name; processes that use different files (containers that do not share a
// volume, users with different default paths) each elect themselves. The
// default file, DefaultPath, is fixed per host and user.
//
// The store's clock is the host's CLOCK_MONOTONIC, in milliseconds, read by
// whichever process runs a statement, together with the kernel's boot id:
// all contenders share one host and therefore one clock, and a record
// written during another boot counts as expired. Where the boot id cannot
// be read, the store falls back to wall-clock milliseconds under a fixed
// pseudo boot id; processes on one host must then all fall back alike.
// Acquired, Renewed and Expires in a lease.Record are converted to wall
// time when a record is read; for a record written during another boot they
// are zero.
//
// The database runs in WAL mode with synchronous=NORMAL: an acknowledged
// write survives the crash of any process, and is lost only with the
// operating system (power loss, kernel panic) — after which the boot id has
// changed and every lease counts as expired anyway, so no lost grant or
// renewal can let two holders overlap. Tokens then rest on the wall-clock
// floor, as after a deleted database. An acquire (the grant, or the candidate mark
// and the read of the holder), a group's join and renewal round, and the
// creation of the tables are each one BEGIN IMMEDIATE transaction, which
// takes the write lock first; every other write is one statement. Files are
// created owner-only (directory 0700, database 0600), and a database on a
// network filesystem is refused: SQLite's locks are unreliable there.
//
// The package registers the DSN schemes "sqlite" and "file" with
// lease.Register:
//
//	sqlite:/abs/path.db   sqlite:///abs/path.db   sqlite:rel/path.db
//	file:/abs/path.db     file:rel/path.db
//
// A relative path is taken relative to the working directory. The only
// query option is unsafe_allow_network_fs=1, which skips the network
// filesystem check; it is unsafe because two hosts can then both believe
// they hold the same lease.
package sqlite
