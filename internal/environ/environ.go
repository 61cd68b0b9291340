// Package environ keeps secrets in leaderrun's own environment from other
// processes: it blanks their values in the environment block that the
// kernel shows as /proc/PID/environ, and makes the process non-dumpable, so
// that other processes of the same user cannot read its memory or its
// /proc files (root still can).
package environ

// Scrub overwrites with NUL bytes the value of every variable in keys in
// this process's initial environment block (what /proc/self/environ
// shows), and removes them from the Go environment. Call it once the
// values have been read. It returns an error where that block cannot be
// rewritten; the variables are unset either way.
func Scrub(keys ...string) error { return scrub(keys) }

// Hide marks this process non-dumpable (PR_SET_DUMPABLE 0): no core dumps,
// and its /proc/PID files other than the world-readable ones (stat,
// status) belong to root, so another process of the same user can neither
// read its environment nor its memory. Children are not affected: exec
// makes them dumpable again.
func Hide() error { return hide() }
