// Package samehost is leaderrun's same-host fast path: a holder records in its
// lease where it runs (Where, written with Store.Annotate), and a follower
// on the same host and in the same PID namespace proves the holder dead
// (Prover) so that it may take the name over at once (Store.Seize) instead
// of at the lease's expiry.
//
// The proof rests on pidfds, which name one process and never a later
// process that reuses its pid. While the holder lives, the follower opens a
// pidfd on the holder and one on the holder's command, and checks after
// opening each that the pid still has the start time the record gives (and,
// for the command, that the holder is its parent). From then on nothing
// depends on pid numbers: it waits for the holder's pidfd to report an exit
// (a stopped holder has not exited), SIGKILLs the command and the process
// group the command leads through the command's pidfd
// (pidfd_send_signal with PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9), waits for
// the command to exit, and then until no process is left in that group.
// Anything it cannot verify — another boot or PID namespace, a record it
// cannot parse, a process that is gone or is another, no permission to
// signal, a kernel without group signals through pidfds — ends the proof
// with an error, and the follower waits for the expiry instead.
//
// The group kill reaches only what stayed in the command's process group,
// so the proof goes ahead only where the command's whole tree can be
// killed: the command is the init of a PID namespace of its own (its
// pidfd reports the exit once the kernel has killed the namespace), or
// it runs in a cgroup its holder made for it (cgroup.kill, then the wait
// until the cgroup is empty). A command in the holder's PID namespace
// without such a cgroup is not proved: a process that left its group
// (setsid) would outlive the kill.
//
// A holder that ends its tenure gracefully says so on its host too: once
// its command's whole tree is gone, it writes into its EndSignal, a FIFO
// in its user's runtime directory that a watching follower opened by its
// path, after checking what the path names (a holder that dies only
// closes it). A follower that reads a byte signals nothing: it checks that
// the command has exited and its cgroup is empty, claims the signal (of
// the followers on the host, one does), and then takes the name at once,
// without waiting for the release to reach it through the store. A holder
// stopped by a signal says first that it is stopping (EndSignal.Stopping):
// the follower that claims that word takes the name while the old command
// stops, and starts its own only after the end itself, as above, or once
// the old command has exited with its whole tree gone, whichever it sees
// first.
// docs/design.md has the full argument.
package samehost
