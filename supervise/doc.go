// Package supervise runs one child process and guarantees it, and everything
// it spawned, dies when told to.
//
// Start executes the command directly, without a shell, in its own process
// group. At a terminal that group is in the background: this process stays
// the foreground job, so that the terminal's Ctrl-C, Ctrl-\ and Ctrl-Z reach
// it, whatever the command does with them, and it passes them on. A
// command that reads from the terminal (stopped by SIGTTIN, as any
// background job is) or sets its modes (SIGTTOU) is made the foreground
// job and continued, and the terminal is taken back when it stops at the
// terminal or ends (see tty.go). When this process stops as a job does
// (Suspend), every child's whole tree is frozen first, and on SIGCONT it
// thaws only where Spec.Resumable says so; else it dies frozen (see
// freeze.go). With a PID namespace, Prepare does all of a start ahead but
// the command's fork, and Prepared.Start gives the waiting init the word
// and the command's environment (see prepare.go). The child gets SIGKILL if
// the thread that forked it dies, and that thread lives until the child has
// been reaped, so the child never outlives this process.
//
// The package owns every wait in the process. A single reaper goroutine,
// started by the first Start, calls wait4(-1) on each SIGCHLD and once a
// second; it delivers statuses to Children and reaps every other zombie
// (orphans adopted as PID 1 or as child subreaper). Once Start has been
// called, nothing else in the process may wait for children: os/exec's Wait
// and os.Process.Wait would lose statuses to the reaper, or steal them.
//
// Stop sends the stop signal to the group, waits KillGrace, sends SIGKILL to
// the group, then kills every remaining child of this process that is not
// another live Child, until none is left. It returns only when all of them
// have been reaped. In a PID namespace the stop signal goes from this
// process to the command's group itself, found by the pid the init reports
// once the command runs (see nsstop.go); other signals go through the
// init. Deliver sends the stop signal ahead of Stop, which then sends none
// of its own.
package supervise
