package supervise

import (
	"crypto/rand"
	"crypto/subtle"
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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// With Spec.Namespace, Start does not exec the command itself. It starts
// this program again as the init (PID 1) of a new PID namespace, and that
// init runs the command as its child. When the init dies for any reason —
// also when this process is SIGKILLed and Pdeathsig kills the init — the
// kernel kills every process left in the namespace: no descendant survives,
// wherever it moved in the process tree.

// initEnv marks the namespace's init. Its value is "FD SIGNAL GRACE NONCE":
// the status pipe's descriptor, the stop signal (0 for a probe that runs
// nothing; see ProbeNamespace), the kill grace in
// nanoseconds, and a random nonce that the parent also writes to the
// handshake pipe. A variable alone, which anyone can set, never makes a
// process the init: it must also be PID 1 of a namespace whose creator is
// outside it, and read the same nonce from the handshake pipe.
const initEnv = "LEADERRUN_INTERNAL_PIDNS_INIT"

// initStatusFD is where the init finds the write end of the status pipe,
// initHandshakeFD the read end of the handshake pipe.
const (
	initStatusFD    = 3
	initHandshakeFD = 4
)

// handshakeWait bounds how long a would-be init waits for the nonce.
const handshakeWait = 5 * time.Second

// ErrNamespace means a PID namespace could not be created: that takes root
// or CAP_SYS_ADMIN, or a kernel that lets users create user namespaces.
var ErrNamespace = errors.New("cannot create a PID namespace")

// IsNamespaceInit reports whether this process was started by Start as the
// init of a PID namespace. Such a process must run RunInit and exit with
// its result before doing anything else. Only the first call checks; it
// may wait up to handshakeWait for the parent's nonce.
func IsNamespaceInit() bool {
	isInitOnce.Do(func() { isInit = checkInit() })
	return isInit
}

var (
	isInitOnce sync.Once
	isInit     bool
)

// checkInit verifies that leaderrun made this process a namespace's init:
// the variable, PID 1 with a parent outside the namespace (getppid is 0),
// and the nonce on the handshake pipe.
func checkInit() bool {
	v := os.Getenv(initEnv)
	if v == "" || os.Getpid() != 1 || os.Getppid() != 0 {
		return false
	}
	_, _, _, nonce, err := parseInitEnv(v)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(initHandshakeFD, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return false
	}
	if unix.SetNonblock(initHandshakeFD, true) != nil {
		return false
	}
	fds := []unix.PollFd{{Fd: initHandshakeFD, Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int(handshakeWait.Milliseconds())); err != nil || n != 1 {
		return false
	}
	buf := make([]byte, len(nonce)+1)
	n, _ := unix.Read(initHandshakeFD, buf)
	unix.Close(initHandshakeFD)
	return n == len(nonce) && subtle.ConstantTimeCompare(buf[:n], []byte(nonce)) == 1
}

// RunInit is the init of a PID namespace that Start created: it runs the
// command named by its arguments (path, then argv), forwards the signals it
// receives on sigs to the command's process group, reaps every process in
// the namespace, stops what the command leaves behind, reports the
// command's Status to its parent through the status pipe, and returns the
// exit code for this process: the command's (Status.ExitCode), which
// stands when the parent reads no valid report.
//
// The status pipe is the init's alone: it is closed in the command when
// that execs, so that the command cannot write its own end; and the init
// never waits for room in it, so that its exit, which ends the command's
// whole tree, never waits on what the pipe holds.
func RunInit(sigs <-chan os.Signal) int {
	fd, stopSig, grace, _, err := parseInitEnv(os.Getenv(initEnv))
	os.Unsetenv(initEnv)
	if err != nil || len(os.Args) < 3 {
		fmt.Fprintf(os.Stderr, "leaderrun: namespace init: bad arguments (%v)\n", err)
		return 125
	}
	syscall.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		fmt.Fprintf(os.Stderr, "leaderrun: namespace init: status pipe: %v\n", err)
		return 125
	}
	defer unix.Close(fd)
	// The caller subscribed to every signal before it called us: from
	// now on a signal is forwarded, not lost (the kernel drops a signal
	// to a namespace's init that has no handler for it).
	report(fd, readyLine)
	if stopSig == 0 { // ProbeNamespace's init
		report(fd, encodeStatus(Status{}))
		return 0
	}
	remountProc()

	child, err := Start(Spec{Path: os.Args[1], Args: os.Args[2:], StopSignal: stopSig, KillGrace: grace,
		clearAmbient: true, noCgroup: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaderrun: %v\n", err)
		st := Status{Code: 126}
		if errors.Is(err, ErrNotFound) {
			st.Code = 127
		}
		report(fd, encodeStatus(st))
		return st.Code
	}
	for {
		select {
		case s := <-sigs:
			if sig, ok := s.(syscall.Signal); ok {
				if sig == syscall.SIGTSTP {
					sig = syscall.SIGSTOP // see Child.Signal
				}
				child.Signal(sig)
			}
		case <-child.Done():
			st := child.Stop() // what the command left behind gets its grace too
			report(fd, encodeStatus(st))
			return st.ExitCode()
		}
	}
}

// report writes line, shorter than PIPE_BUF, to the status pipe fd in one
// write that is whole or nothing: a full pipe (nothing but the init ever
// writes to it) drops the line instead of blocking.
func report(fd int, line string) {
	unix.Write(fd, []byte(line))
}

// remountProc gives the namespace its own /proc, so that the command sees
// its own pids there. It is best effort: without it /proc is the host's.
// The mounts become slaves, not private: what the host mounts later still
// appears to the command, and the new /proc never appears to the host.
func remountProc() {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return
	}
	unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

func initEnvValue(stop syscall.Signal, grace time.Duration, nonce string) string {
	return fmt.Sprintf("%s=%d %d %d %s", initEnv, initStatusFD, int(stop), int64(grace), nonce)
}

func parseInitEnv(v string) (fd int, stop syscall.Signal, grace time.Duration, nonce string, err error) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0, 0, 0, "", fmt.Errorf("%s: want 4 fields", initEnv)
	}
	n := make([]int64, 3)
	for i, s := range f[:3] {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, 0, "", fmt.Errorf("%s: %w", initEnv, err)
		}
	}
	return int(n[0]), syscall.Signal(n[1]), time.Duration(n[2]), f[3], nil
}

// encodeStatus and decodeStatus carry a Status through the status pipe:
// one line "CODE SIGNAL\n", at most maxReportLen bytes.
func encodeStatus(s Status) string { return fmt.Sprintf("%d %d\n", s.Code, int(s.Signal)) }

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
	early           string       // what awaitReady read that was not readyLine
	logger          *slog.Logger // says why a report was refused; nil for none
}

// forked is called once the init runs: this process's copies of the
// child's pipe ends are closed and the nonce is sent.
func (l *nsLaunch) forked() {
	l.write.Close()
	l.hsRead.Close()
	io.WriteString(l.hsWrite, l.nonce)
	l.hsWrite.Close()
	l.awaitReady()
}

// readyLine is what the init writes on the status pipe once it forwards
// signals; its final status follows.
const readyLine = "ready\n"

// awaitReady returns once the init wrote readyLine, or died, or
// handshakeWait passed: until then a stop signal sent to it would be lost,
// or end its Go runtime with status 2 before it runs the command.
func (l *nsLaunch) awaitReady() {
	l.status.SetReadDeadline(time.Now().Add(handshakeWait + time.Second))
	defer l.status.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	var line []byte
	for len(line) < len(readyLine) {
		if n, err := l.status.Read(b); n == 0 || err != nil {
			break
		}
		line = append(line, b[0])
		if b[0] == '\n' {
			break
		}
	}
	l.early = string(line)
}

// prepareNamespace rewrites what run forks: path and args become this
// program's, the command's path and argv follow, and the status pipe is
// passed as descriptor 3.
func (c *Child) prepareNamespace(path string, attr *syscall.ProcAttr) (string, []string, *nsLaunch, error) {
	self, err := os.Executable()
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
	l := &nsLaunch{status: r, write: w, hsRead: hr, hsWrite: hw, nonce: hex.EncodeToString(b), logger: c.logger}
	attr.Files = append(attr.Files, w.Fd(), hr.Fd())
	stop := c.spec.StopSignal
	if c.spec.probe {
		stop = 0 // no command: the init only proves it could start
	}
	attr.Env = append(attr.Env[:len(attr.Env):len(attr.Env)], initEnvValue(stop, c.spec.KillGrace, l.nonce))
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
	args := append([]string{os.Args[0], path}, c.spec.Args...)
	return self, args, l, nil
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
// stands when the report is missing (the init was killed) or refused. It
// reads no more than one byte past the longest report.
func (l *nsLaunch) finish(st Status) Status {
	defer l.status.Close()
	b, _ := io.ReadAll(io.LimitReader(l.status, int64(maxReportLen+1)))
	if l.early != readyLine {
		b = append([]byte(l.early), b...)
	}
	if len(b) == 0 {
		return st
	}
	reported, err := decodeStatus(b)
	if err != nil {
		if l.logger != nil {
			l.logger.Warn("refused the namespace init's report of the command's status; the init's own exit status stands",
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
