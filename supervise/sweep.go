package supervise

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sweep kills and reaps every child of this process that is not a live
// Child and that came from c or from no Child it can tell (see attrib.go),
// until none remains; strays of Children not yet stopped are left alone.
// Descendants that escaped c's group are adopted by this process as child
// subreaper or PID 1 once their parent dies; killing one may orphan its own
// children, which then appear on a later pass.
//
// /proc/self/task/*/children is quick but, as proc(5) warns, may miss a
// child while processes are created or destroyed; a pass that finds none is
// therefore confirmed by a scan of every /proc/<pid>/stat before sweep ends.
func sweep(c *Child) {
	logger := c.logger
	wait := time.Millisecond
	killed := make(map[int]bool)
	scan := func() []int { return scanChildren(os.Getpid()) }
	defer theReaper.forgetChild(c)
	for pass := 1; ; pass++ {
		listed := theReaper.killStrays(c, killed, listChildren)
		scanned := 0
		if listed == 0 {
			scanned = theReaper.killStrays(c, killed, scan)
		}
		logger.Debug("sweep pass", "pass", pass, "listed", listed, "scanned", scanned)
		if listed == 0 && scanned == 0 {
			return
		}
		theReaper.reap()
		time.Sleep(wait) // let the killed die
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// killStrays sends SIGKILL to each child of this process (as children lists
// them) that is not a live Child and belongs to c or to no Child not yet
// stopped, and
// to its process group unless that is our own or a live Child's. It
// returns how many it found, zombies included, and logs each pid not yet
// in killed once.
func (r *reaper) killStrays(c *Child, killed map[int]bool, children func() []int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, pid := range children() {
		if r.isLive(pid) {
			continue
		}
		if o := r.owner(pid); o != nil && o != c && r.tags[o.tag] == o {
			continue // another Child's, not yet stopped: its own Stop sweeps it
		}
		n++
		if err := unix.Kill(pid, syscall.SIGKILL); err == nil && !killed[pid] {
			killed[pid] = true
			c.logger.Info("killed escaped descendant", "pid", pid)
		}
		// The stray, alive or a zombie, pins its group ID.
		if pgid, err := unix.Getpgid(pid); err == nil && !r.isLive(pgid) {
			_ = killGroup(pgid, syscall.SIGKILL)
		}
	}
	return n
}

// hasChildInGroup reports whether a child of this process is in process
// group pgid. r.mu must be held.
func (r *reaper) hasChildInGroup(pgid int) bool {
	for _, pid := range listChildren() {
		if g, err := unix.Getpgid(pid); err == nil && g == pgid {
			return true
		}
	}
	return false
}
