package supervise

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// Namespace is how Start isolates the command's process tree.
type Namespace int

const (
	// NoNamespace runs the command in this process's PID namespace. A
	// descendant that leaves the command's process group survives a
	// SIGKILL of this process.
	NoNamespace Namespace = iota
	// PIDNamespace runs it in a new PID namespace (and mount namespace, for
	// its own /proc). It takes root or CAP_SYS_ADMIN.
	PIDNamespace
	// UserNamespace runs it in a new user namespace that maps this
	// process's own uid and gid to themselves and owns a new PID and mount
	// namespace: no privilege needed where the kernel allows unprivileged
	// user namespaces. The command keeps its identity; it sees the
	// differences docs/guarantees.md lists (ids other than its own show as
	// nobody, setuid and file capabilities do not raise privilege).
	UserNamespace
)

func (n Namespace) String() string {
	switch n {
	case NoNamespace:
		return "none"
	case PIDNamespace:
		return "pid"
	case UserNamespace:
		return "user+pid"
	}
	return fmt.Sprintf("Namespace(%d)", int(n))
}

// With Spec.Namespace, Start does not exec the command itself. It starts a
// small init (package nsinit: the embedded leaderrun-init program, see
// initprog.go, or else this program again) as the init (PID 1) of a new PID
// namespace, and that init runs the command as its child. When the init
// dies for any reason — also when this process is SIGKILLed and Pdeathsig
// kills the init — the kernel kills every process left in the namespace:
// no descendant survives, wherever it moved in the process tree.

// handshakeWait bounds how long a would-be init waits for the nonce.
const handshakeWait = nsinit.HandshakeWait

// ErrNamespace means a PID namespace could not be created: that takes root
// or CAP_SYS_ADMIN, or a kernel that lets users create user namespaces.
var ErrNamespace = errors.New("cannot create a PID namespace")

// IsNamespaceInit reports whether this process was started by Start as the
// init of a PID namespace (when no init program is embedded, Start runs
// this program again as the init). Such a process must run RunInit and
// exit with its result before doing anything else: RunInit exits at once,
// running nothing, when the parent's nonce did not come. Only the first
// call checks; it may wait up to handshakeWait for the nonce.
//
// It also reports true for a process that Start runs to start a command
// with the signals this process started with (see sigstate.go); RunInit
// then starts it.
func IsNamespaceInit() bool { return nsinit.IsExec() || nsinit.IsInit() }

// RunInit is the init of a PID namespace that Start created (see package
// nsinit): it runs the command named by its arguments, and returns the exit
// code for this process. It subscribes to the signals itself.
func RunInit() int {
	if nsinit.IsExec() {
		return nsinit.RunExec()
	}
	return nsinit.Run()
}

// encodeStatus and decodeStatus carry a Status through the status pipe:
// one line "CODE SIGNAL\n", at most maxReportLen bytes.
func encodeStatus(s Status) string { return nsinit.EncodeStatus(s.Code, s.Signal) }

// maxReportLen is the length of the longest report, "255 0\n".
const maxReportLen = len("255 0\n")

// decodeStatus returns the Status of a report: exactly one line of an
// exit code from 0 to 255 and 0, or 0 and a signal a process can die by
// (see canEnd). It refuses anything else, saying why.
func decodeStatus(b []byte) (Status, error) {
	if len(b) > maxReportLen {
		return Status{}, fmt.Errorf("longer than %d bytes", maxReportLen)
	}
	line, ok := strings.CutSuffix(string(b), "\n")
	f := strings.Split(line, " ")
	if !ok || len(f) != 2 {
		return Status{}, errors.New(`not one line "CODE SIGNAL"`)
	}
	code, err := decimal(f[0], 255)
	if err != nil {
		return Status{}, fmt.Errorf("exit code: %w", err)
	}
	sig, err := decimal(f[1], maxSignal)
	if err != nil {
		return Status{}, fmt.Errorf("signal: %w", err)
	}
	st := Status{Code: code, Signal: syscall.Signal(sig)}
	switch {
	case st.Code != 0 && st.Signal != 0:
		return Status{}, errors.New("both an exit code and a signal")
	case st.Signal != 0 && !canEnd(st.Signal):
		return Status{}, fmt.Errorf("no process is killed by signal %d", sig)
	}
	return st, nil
}

// decimal parses s, one to three digits, as a number from 0 to max.
func decimal(s string, max int) (int, error) {
	if len(s) < 1 || len(s) > 3 || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a number of one to three digits")
	}
	n, _ := strconv.Atoi(s)
	if n > max {
		return 0, fmt.Errorf("%d is more than %d", n, max)
	}
	return n, nil
}

// nsLaunch is how run starts a child in its own PID namespace: this
// program as the namespace's init, with the command after it.
type nsLaunch struct {
	status *os.File // read end of the status pipe
	write  *os.File // write end, closed in this process once forked
	// The handshake pipe: the init reads the nonce from hsRead; this
	// process writes it to hsWrite once forked.
	hsRead, hsWrite *os.File
	nonce           string
	early           string // what awaitReady read that was not nsinit.Ready, the ready line
	// prepared: the init waits for the word to run the command (see
	// prepare.go), which goes on hsWrite, kept open until then.
	prepared bool

	// The init's started line (see readStarted): the command's pid in the
	// namespace once it was read, else 0; and what was read in its place.
	command     atomic.Int64
	startedOnce sync.Once
	rest        []byte
}

// forked is called once the init runs: this process's copies of the
// child's pipe ends are closed and the nonce is sent.
func (l *nsLaunch) forked() {
	l.write.Close()
	l.hsRead.Close()
	io.WriteString(l.hsWrite, l.nonce)
	if !l.prepared {
		l.hsWrite.Close()
	}
	l.awaitReady()
}

// awaitReady returns once the init wrote its ready line (nsinit.Ready), or died, or
// handshakeWait passed: until then a stop signal sent to it would be lost,
// or end its Go runtime with status 2 before it runs the command.
func (l *nsLaunch) awaitReady() {
	l.status.SetReadDeadline(time.Now().Add(handshakeWait + time.Second))
	defer l.status.SetReadDeadline(time.Time{})
	l.early = string(readLine(l.status, len(nsinit.Ready)))
}

// maxStartedLen is the length of the longest started line.
const maxStartedLen = len(nsinit.Started + "4194304\n")

// readStarted reads the init's started line (nsinit.EncodeStarted), which
// follows the ready line once the command runs, and records the command's
// pid in the namespace. What it read in the line's place (the command's
// status, when it never ran) is kept for finish. It returns at the line's
// end or the pipe's, and reads only once: run calls it on a goroutine of
// its own when the init is ready, finish before it reads the status.
func (l *nsLaunch) readStarted() {
	l.startedOnce.Do(func() {
		line := readLine(l.status, maxStartedLen)
		digits, ok := strings.CutPrefix(string(line), nsinit.Started)
		if digits, ok = strings.CutSuffix(digits, "\n"); ok && len(digits) <= 7 && strings.Trim(digits, "0123456789") == "" {
			if pid, err := strconv.Atoi(digits); err == nil && pid > 1 {
				l.command.Store(int64(pid))
				return
			}
		}
		l.rest = line
	})
}

// readLine reads from f up to the end of a line, the end of f or its read
// deadline, or max bytes, one byte at a time (what follows the line is not
// this reader's), and returns what it read.
func readLine(f *os.File, max int) []byte {
	b := make([]byte, 1)
	var line []byte
	for len(line) < max {
		if n, err := f.Read(b); n == 0 || err != nil {
			break
		}
		line = append(line, b[0])
		if b[0] == '\n' {
			break
		}
	}
	return line
}

// prepareNamespace rewrites what run forks: path and args become the
// init's (see initExecutable), the command's path and argv follow, and the status pipe is
// passed as descriptor 3; sigs is the signal state the init gives the
// command.
func (c *Child) prepareNamespace(path string, attr *syscall.ProcAttr, sigs signalState) (string, []string, *nsLaunch, error) {
	exe, argv0, err := initExecutable()
	if err != nil {
		return "", nil, nil, fmt.Errorf("start %q in a PID namespace: %w", c.spec.Path, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", nil, nil, fmt.Errorf("start %q in a PID namespace: %w", c.spec.Path, err)
	}
	hr, hw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return "", nil, nil, fmt.Errorf("start %q in a PID namespace: %w", c.spec.Path, err)
	}
	b := make([]byte, 16)
	rand.Read(b)
	l := &nsLaunch{status: r, write: w, hsRead: hr, hsWrite: hw, nonce: hex.EncodeToString(b), prepared: c.spec.prepared}
	attr.Files = append(attr.Files, w.Fd(), hr.Fd())
	stop := c.spec.StopSignal
	if c.spec.probe {
		stop = 0 // no command: the init only proves it could start
	}
	attr.Env = append(attr.Env[:len(attr.Env):len(attr.Env)], nsinit.EnvValue(stop, c.spec.KillGrace, l.nonce),
		nsinit.SignalsEnv+"="+sigs.value())
	if l.prepared {
		attr.Env = append(attr.Env, nsinit.PreparedEnv+"=1")
	}
	attr.Sys.Cloneflags = unix.CLONE_NEWPID | unix.CLONE_NEWNS
	if c.spec.Namespace == UserNamespace {
		// The init needs CAP_SYS_ADMIN in its namespaces to mount their
		// /proc: it gets it as an ambient capability (in the new user
		// namespace only) and clears it before it runs the command.
		attr.Sys.Cloneflags |= unix.CLONE_NEWUSER
		attr.Sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		attr.Sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		attr.Sys.GidMappingsEnableSetgroups = false
		attr.Sys.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	args := append([]string{argv0, path}, c.spec.Args...)
	return exe, args, l, nil
}

// dumpableWhileMapping makes this process dumpable, if it was not, until
// the returned function runs. ForkExec writes a user namespace's uid and
// gid maps into the new process's /proc files, which belong to root (and
// so cannot be written without privilege) while the process is not
// dumpable, and a forked process inherits that until it execs. The window
// is one fork; the reaper's mutex, held around every fork, keeps forks
// from overlapping it.
func dumpableWhileMapping() (restore func()) {
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		return func() {}
	}
	unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
	return func() { unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
}

// dropInheritedCaps clears the calling thread's ambient and inheritable
// capabilities, which a user namespace's init was given to mount /proc:
// the command forked from this thread must not inherit them. Only that
// thread forks the command, and it never runs anything else.
func dropInheritedCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear inheritable capabilities: %w", err)
	}
	return nil
}

// finish returns the command's status that the init reported, once the
// init has been reaped (so the kernel has killed every process in its
// namespace, and no writer of the pipe is left); the init's own status st
// stands when the report is missing (the init was killed) or refused,
// which logger says. It reads no more than one byte past the longest
// report.
func (l *nsLaunch) finish(st Status, logger *slog.Logger) Status {
	defer l.status.Close()
	if l.prepared {
		l.hsWrite.Close() // a start given up: the init had no word
	}
	l.readStarted() // the init is reaped: it returns at once
	b, _ := io.ReadAll(io.LimitReader(l.status, int64(maxReportLen+1)))
	b = append(l.rest, b...)
	if l.early != nsinit.Ready {
		b = append([]byte(l.early), b...)
	}
	if len(b) == 0 {
		return st
	}
	reported, err := decodeStatus(b)
	if err != nil {
		if logger != nil {
			logger.Warn("refused the namespace init's report of the command's status; the init's own exit status stands",
				"report", fmt.Sprintf("%.*q", maxReportLen+1, b), "why", err, "status", st)
		}
		return st
	}
	return reported
}

// ProbeNamespace returns the strongest Namespace this process can create:
// PIDNamespace with root or CAP_SYS_ADMIN, else UserNamespace where the
// kernel allows it (found by starting an init that exits at once), else
// NoNamespace and an error that wraps ErrNamespace and says why.
func ProbeNamespace() (Namespace, error) {
	if unsharePID() == nil {
		return PIDNamespace, nil
	}
	self, err := os.Executable()
	if err != nil {
		return NoNamespace, fmt.Errorf("%w: %w", ErrNamespace, err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return NoNamespace, fmt.Errorf("%w: %w", ErrNamespace, err)
	}
	defer null.Close()
	// A probe's init reports success at once, before it runs anything.
	c, err := Start(Spec{Path: self, Namespace: UserNamespace,
		Stdin: null, Stdout: null, Stderr: null, probe: true, noCgroup: true})
	if err != nil {
		return NoNamespace, fmt.Errorf("%w: not root, and no user namespace either: %w", ErrNamespace, err)
	}
	select {
	case <-c.Done():
	case <-time.After(handshakeWait + time.Second):
	}
	if st := c.Stop(); st != (Status{}) {
		return NoNamespace, fmt.Errorf("%w: a user namespace's init failed (%v)", ErrNamespace, st)
	}
	return UserNamespace, nil
}

// unsharePID reports whether this process may create PID namespaces of its
// own, without starting anything.
func unsharePID() error {
	result := make(chan error, 1)
	go func() {
		// The unshare changes this thread's namespace for its future
		// children; the thread is never unlocked, so it exits with the
		// goroutine and nothing else ever forks from it.
		runtime.LockOSThread()
		result <- unix.Unshare(unix.CLONE_NEWPID)
	}()
	return <-result
}
