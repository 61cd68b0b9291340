package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// While this process is stopped by job control (Ctrl-Z, or a stop of its
// command at the terminal that it follows, see tty.go), nothing of its
// commands' trees runs: a command could otherwise stop its own supervisor
// (kill -TSTP $$) and keep a descendant running after the lease has
// passed to another replica. Suspend freezes every live Child's whole
// tree first: through its cgroup (cgroup.freeze) when it has one, else by
// sending SIGSTOP to every process of the tree (its PID namespace, or its
// descendants and the strays attributed to it) until none is left
// running. When this process is continued, each Child's Spec.Resumable is
// asked first, before anything thaws: a tree whose tenure ended meanwhile
// is killed while still frozen; the others are thawed. A SIGCONT passed
// on to a Child, and its Stop, wait until then.

// suspendMu is held for the whole of a suspension, from the freeze to
// the thaw, and around each fork: a command is started either before a
// suspension freezes it or after the suspension ended.
var suspendMu sync.Mutex

// freezeWait bounds how long a freeze waits for the tree to be frozen: a
// process in uninterruptible sleep freezes only when its system call
// returns, before it runs any of its own code again.
const freezeWait = time.Second

// frozenTree is a Child's tree that a suspension froze.
type frozenTree struct {
	c      *Child
	cgroup bool          // frozen through the Child's cgroup
	procs  []heldProcess // else: every process of the tree, stopped with SIGSTOP
	done   chan struct{} // closed once the tree was thawed or killed
}

// heldProcess is a process of a tree stopped with SIGSTOP.
type heldProcess struct {
	pid   int
	start uint64 // its start time (procstat.Stat.Start)
	fd    int    // a pidfd on it, or -1 where pidfds are missing
	// wasStopped: it was stopped already (the terminal's stop of the
	// command, a job the command stopped); the thaw leaves it so.
	wasStopped bool
}

// Suspend stops this process as a job stops (SIGSTOP), with every live
// Child's whole tree frozen first, and returns once it was continued
// (SIGCONT) and each tree was thawed, or killed where the Child's
// Spec.Resumable said no. As PID 1, which the kernel does not let stop,
// it does nothing.
func Suspend() {
	if IsInit() {
		return
	}
	suspendMu.Lock()
	defer suspendMu.Unlock()
	var trees []*frozenTree
	for _, c := range theReaper.live() {
		trees = append(trees, c.freeze())
	}
	stopSelf()
	resume(trees)
}

// stopSelf stops this process with SIGSTOP, and returns once it was
// continued. The signal goes to the calling thread, which therefore stops
// before the call returns (the whole process stops with it); sent to the
// process, it could be taken by another thread while this one returned.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Tgkill(os.Getpid(), unix.Gettid(), syscall.SIGSTOP)
}

// resume asks each tree's Child whether it may run again, kills those
// that may not, then thaws the others.
func resume(trees []*frozenTree) {
	var thaw []*frozenTree
	for _, f := range trees {
		if r := f.c.spec.Resumable; r == nil || r() {
			thaw = append(thaw, f)
			continue
		}
		f.kill()
		f.c.logger.Warn("resumed after the tenure ended; killed the command's whole tree while it was still frozen",
			"pid", f.c.pid)
		f.release()
	}
	for _, f := range thaw {
		f.thaw()
		f.c.logger.Info("resumed; the command's tree runs again", "pid", f.c.pid)
		f.release()
	}
}

// live returns the registered Children that have not been reaped.
func (r *reaper) live() []*Child {
	r.mu.Lock()
	defer r.mu.Unlock()
	children := make([]*Child, 0, len(r.children))
	for _, c := range r.children {
		children = append(children, c)
	}
	return children
}

// freeze freezes c's whole tree.
func (c *Child) freeze() *frozenTree {
	f := &frozenTree{c: c, done: make(chan struct{})}
	theReaper.mu.Lock()
	c.frozen = f
	theReaper.mu.Unlock()
	if c.cg != nil {
		// A stop passed through the namespace's init (Ctrl-Z) reaches
		// the command only once the init has forwarded it: wait for
		// the command's processes to stop, so that the command is
		// stopped, as Ctrl-Z stops it, and not merely frozen.
		stopping := func(int) bool { return false }
		if c.stopAsked.Swap(false) {
			stopping = func(pid int) bool { return pid != c.pid }
		}
		err := c.cg.freeze(stopping)
		if err == nil {
			f.cgroup = true
			return f
		}
		c.logger.Warn("cannot freeze the command's cgroup; stopping its processes one by one", "cgroup", c.cg.dir, "err", err)
	}
	f.procs = c.stopTree()
	return f
}

// awaitThaw returns once c's tree is not frozen.
func (c *Child) awaitThaw() {
	theReaper.mu.Lock()
	f := c.frozen
	theReaper.mu.Unlock()
	if f != nil {
		<-f.done
	}
}

// thaw lets the tree run again.
func (f *frozenTree) thaw() {
	if f.cgroup {
		if err := writeCgroupFile(f.c.cg.dir, "cgroup.freeze", "0"); err != nil {
			f.c.logger.Warn("cannot thaw the command's cgroup", "cgroup", f.c.cg.dir, "err", err)
		}
		return
	}
	for _, p := range f.procs {
		if !p.wasStopped {
			p.signal(syscall.SIGCONT)
		}
	}
}

// kill kills every process of the tree, frozen as it is (a frozen or
// stopped process dies by SIGKILL without running again). The Child's
// Stop still reaps it and cleans up.
func (f *frozenTree) kill() {
	c := f.c
	if c.tty != nil {
		c.tty.mu.Lock()
		c.tty.wants = false // the terminal is not given to a dying group
		c.tty.mu.Unlock()
	}
	if f.cgroup {
		if writeCgroupFile(c.cg.dir, "cgroup.kill", "1") != nil {
			for _, pid := range c.cg.procs() {
				unix.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, p := range f.procs {
		p.signal(syscall.SIGKILL)
	}
	c.signal(syscall.SIGKILL)
}

// release closes what the freeze held and ends c's wait for the thaw.
func (f *frozenTree) release() {
	for _, p := range f.procs {
		if p.fd >= 0 {
			unix.Close(p.fd)
		}
	}
	theReaper.mu.Lock()
	f.c.frozen = nil
	theReaper.mu.Unlock()
	close(f.done)
}

// freeze freezes every process in the cgroup and below it, and waits
// until the kernel says so (cgroup.events "frozen 1"), for at most
// freezeWait. Those that stopping reports are about to be stopped are
// waited for first, as long as that bound allows.
func (g *cgroup) freeze(stopping func(pid int) bool) error {
	// A stop already sent (Ctrl-Z's SIGSTOP of the command's group) takes
	// effect first: frozen with it pending, a process would not show
	// stopped.
	deadline := time.Now().Add(freezeWait)
	pollUntil(deadline, func() bool {
		for _, pid := range g.procs() {
			if stopPending(pid) || stopping(pid) && !isStopped(pid) {
				return false
			}
		}
		return true
	})
	if err := writeCgroupFile(g.dir, "cgroup.freeze", "1"); err != nil {
		return err
	}
	// Past the deadline, each process freezes as it leaves its system call.
	pollUntil(deadline, g.frozen)
	return nil
}

// jobStops are the signals that stop a process.
const jobStops = 1<<(syscall.SIGSTOP-1) | 1<<(syscall.SIGTSTP-1) | 1<<(syscall.SIGTTIN-1) | 1<<(syscall.SIGTTOU-1)

// stopPending reports whether a signal that stops process pid is pending
// for it, and not blocked.
func stopPending(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	var pending, blocked uint64
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			continue
		}
		switch k {
		case "SigPnd", "ShdPnd":
			pending |= n
		case "SigBlk":
			blocked = n
		}
	}
	return pending&^blocked&jobStops != 0
}

// isStopped reports whether process pid is stopped by a signal, or gone.
func isStopped(pid int) bool {
	st, err := procstat.Read(pid)
	return err != nil || st.State == 'T' || st.State == 'Z'
}

// pollUntil polls cond, less often each time (up to every 20 ms), until
// it holds or deadline has passed.
func pollUntil(deadline time.Time, cond func() bool) {
	for wait := 100 * time.Microsecond; !cond() && time.Now().Before(deadline); wait = min(2*wait, 20*time.Millisecond) {
		time.Sleep(wait)
	}
}

// frozen reports whether cgroup.events says the cgroup is frozen.
func (g *cgroup) frozen() bool {
	data, err := os.ReadFile(filepath.Join(g.dir, "cgroup.events"))
	return err == nil && strings.Contains("\n"+string(data), "\nfrozen 1\n")
}

// writeCgroupFile writes value to the cgroup's existing file name.
func writeCgroupFile(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// stopTree sends SIGSTOP to every process of c's tree, pass after pass
// (a process may fork before its SIGSTOP arrives), until a pass finds
// none it has not yet stopped, for at most freezeWait. A process that
// gets SIGSTOP runs none of its own code again until it is continued, and
// cannot fork: the passes end.
func (c *Child) stopTree() []heldProcess {
	held := map[int]heldProcess{}
	var order []int
	deadline := time.Now().Add(freezeWait)
	for {
		procs := allProcs()
		byPid := make(map[int]procstat.Stat, len(procs))
		kids := map[int][]int{}
		for _, p := range procs {
			byPid[p.Pid] = p
			kids[p.PPid] = append(kids[p.PPid], p.Pid)
		}
		found := false
		stack := c.treeRoots()
		seen := map[int]bool{}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[pid] {
				continue
			}
			seen[pid] = true
			stack = append(stack, kids[pid]...)
			st, ok := byPid[pid]
			if _, done := held[pid]; done || !ok || st.State == 'Z' || st.State == 'X' {
				continue
			}
			p, ok := holdProcess(st)
			if !ok {
				continue
			}
			p.signal(syscall.SIGSTOP)
			held[pid] = p
			order = append(order, pid)
			found = true
		}
		if !found || time.Now().After(deadline) {
			break
		}
	}
	out := make([]heldProcess, 0, len(order))
	for _, pid := range order {
		out = append(out, held[pid])
	}
	awaitStopped(out, deadline)
	return out
}

// awaitStopped returns once every thread of every process of procs is
// stopped (or gone), or at deadline: a SIGSTOP takes effect as each
// thread next enters the kernel.
func awaitStopped(procs []heldProcess, deadline time.Time) {
	for _, p := range procs {
		pollUntil(deadline, p.stopped)
	}
}

// stopped reports whether every thread of the process is stopped, or the
// process is gone.
func (p heldProcess) stopped() bool {
	if !p.same() {
		return true
	}
	dir := "/proc/" + strconv.Itoa(p.pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, task := range tasks {
		data, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if st, err := procstat.Parse(data); err == nil && strings.IndexByte("TtZX", st.State) < 0 {
			return false
		}
	}
	return true
}

// treeRoots returns c and the strays of this process (children that are
// no live Child's) that came from c or from no Child it can tell (as
// sweep attributes them).
func (c *Child) treeRoots() []int {
	r := &theReaper
	r.mu.Lock()
	defer r.mu.Unlock()
	roots := []int{c.pid}
	for _, pid := range listChildren() {
		if r.isLive(pid) {
			continue
		}
		if o := r.owner(pid); o == nil || o == c {
			roots = append(roots, pid)
		}
	}
	return roots
}

// holdProcess opens a pidfd on the process st describes, checked against
// its start time; where pidfds are missing, the pid stands alone (checked
// again before each signal). It reports false for a process gone.
func holdProcess(st procstat.Stat) (heldProcess, bool) {
	p := heldProcess{pid: st.Pid, start: st.Start, fd: -1, wasStopped: st.State == 'T' || st.State == 't'}
	fd, err := unix.PidfdOpen(st.Pid, 0)
	switch {
	case err == nil:
		p.fd = fd
	case !errors.Is(err, unix.ENOSYS):
		return p, false
	}
	if !p.same() {
		if p.fd >= 0 {
			unix.Close(p.fd)
		}
		return p, false // gone, or another process under its pid
	}
	return p, true
}

// same reports whether p.pid is still the process p names.
func (p heldProcess) same() bool {
	st, err := procstat.Read(p.pid)
	return err == nil && st.Start == p.start
}

// signal sends sig to the process, never to another under its pid.
func (p heldProcess) signal(sig syscall.Signal) {
	if p.fd >= 0 {
		unix.PidfdSendSignal(p.fd, sig, nil, 0)
	} else if p.same() {
		unix.Kill(p.pid, sig) // a kernel without pidfds (before 5.3)
	}
}
