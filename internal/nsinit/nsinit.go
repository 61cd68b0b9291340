// Package nsinit is the init (PID 1) of a PID namespace that package
// supervise creates for a command: it runs the command, forwards signals to
// its process group, reaps every process in the namespace, gives what the
// command leaves behind its kill grace, and reports the command's status to
// the supervisor through a pipe. When it exits, the kernel kills every
// process left in the namespace.
//
// It is small on purpose: it runs once per supervised command (once per
// owned partition), so it imports nothing but the standard library's
// smallest packages and x/sys/unix. Two programs run it: the stand-alone
// leaderrun-init (./leaderrun-init), which leaderrun embeds when it was built
// with `make build`, and leaderrun itself when it was not.
package nsinit

import (
	"errors"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/shed"
)

// Env marks the namespace's init. Its value is "FD SIGNAL GRACE NONCE":
// the status pipe's descriptor, the stop signal (0 for a probe that runs
// nothing), the kill grace in nanoseconds, and a random nonce that the
// parent also writes to the handshake pipe. A variable alone, which anyone
// can set, never makes a process run a command as the init: it must also
// be PID 1 of a namespace whose creator is outside it, and read the same
// nonce from the handshake pipe; such a PID 1 without the nonce exits.
const Env = "LEADERRUN_INTERNAL_PIDNS_INIT"

// StopsEnv names the descriptor on which the init reports its command's
// job-control stops to the supervisor, one byte (the signal number) each.
// The supervisor passes it when its stdin is its controlling terminal.
const StopsEnv = "LEADERRUN_INTERNAL_TTY_STOPS"

// PreparedEnv marks an init started ahead of its command (a prepared
// start, see supervise.Prepare): once ready, with its namespace's /proc
// mounted, it waits on the handshake pipe for the word to run the command
// (EncodeGo: the command's environment) and runs nothing if the pipe
// ends without it.
const PreparedEnv = "LEADERRUN_INTERNAL_PIDNS_PREPARED"

// maxGo bounds a prepared init's word to run its command (EncodeGo).
const maxGo = 16 << 20

// EncodeGo returns a prepared init's word to run its command with env:
// "G", the length of what follows in decimal, a newline, then each
// variable ended by a NUL byte. A word cut short runs nothing.
func EncodeGo(env []string) ([]byte, error) {
	var body []byte
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.New("an environment variable holds a NUL byte")
		}
		body = append(append(body, kv...), 0)
	}
	if len(body) > maxGo {
		return nil, errors.New("an environment of " + strconv.Itoa(len(body)) + " bytes is more than " + strconv.Itoa(maxGo))
	}
	return append([]byte("G"+strconv.Itoa(len(body))+"\n"), body...), nil
}

// decodeGo returns the environment of a word EncodeGo made; false for
// anything else.
func decodeGo(b []byte) ([]string, bool) {
	head, body, ok := strings.Cut(string(b), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(head, "G"))
	if !ok || !strings.HasPrefix(head, "G") || err != nil || n != len(body) || (n > 0 && body[n-1] != 0) {
		return nil, false
	}
	env := strings.Split(body, "\x00")
	return env[:len(env)-1], true // each variable ends with a NUL
}

// TagEnv is the supervisor's tag of its children's environments; the
// command in the namespace does not inherit it (it means nothing there).
const TagEnv = "LEADERRUN_SUPERVISOR_TAG"

// StatusFD is where the init finds the write end of the status pipe,
// HandshakeFD the read end of the handshake pipe.
const (
	StatusFD    = 3
	HandshakeFD = 4
)

// HandshakeWait bounds how long a would-be init waits for the nonce.
const HandshakeWait = 5 * time.Second

// Ready is what the init writes on the status pipe once it forwards
// signals; the started line (EncodeStarted) follows once the command
// runs, then its final status (EncodeStatus).
const Ready = "ready\n"

// Started begins the line the init writes on the status pipe once its
// command runs (EncodeStarted).
const Started = "started "

// EncodeStarted is the init's report that its command runs as pid in the
// namespace: "started PID\n". The supervisor finds the command by it, to
// send the stop signal to the command's group itself, without the init's
// forwarding on the way.
func EncodeStarted(pid int) string {
	return Started + strconv.Itoa(pid) + "\n"
}

// EnvValue returns the Env assignment for an init that stops its command
// with stop, waits grace before SIGKILL, and expects nonce.
func EnvValue(stop syscall.Signal, grace time.Duration, nonce string) string {
	return Env + "=" + strconv.Itoa(StatusFD) + " " + strconv.Itoa(int(stop)) + " " +
		strconv.FormatInt(int64(grace), 10) + " " + nonce
}

// parseEnv reads an Env value; ok is false when it is malformed.
func parseEnv(v string) (fd int, stop syscall.Signal, grace time.Duration, nonce string, ok bool) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return 0, 0, 0, "", false
	}
	var n [3]int64
	for i, s := range f[:3] {
		var err error
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, 0, 0, "", false
		}
	}
	return int(n[0]), syscall.Signal(n[1]), time.Duration(n[2]), f[3], true
}

// EncodeStatus is the init's report of its command's end: one line
// "CODE SIGNAL\n".
func EncodeStatus(code int, sig syscall.Signal) string {
	return strconv.Itoa(code) + " " + strconv.Itoa(int(sig)) + "\n"
}

// checked is what the first IsInit found.
var checked struct {
	done     bool
	marked   bool // the variable, as PID 1 of a namespace whose creator is outside it
	verified bool // and the nonce read from the handshake pipe
}

// IsInit reports whether this process was started as the init of a PID
// namespace: the variable, PID 1 with a parent outside the namespace
// (getppid is 0). Such a process must call Run and exit with its result
// before doing anything else: Run runs the command only once the parent's
// nonce came on the handshake pipe, and otherwise exits at once. Only the
// first call checks, from the main goroutine; it may wait up to
// HandshakeWait for the parent's nonce.
//
// A would-be init without its nonce must never go on as anything else (the
// program that runs it may be leaderrun itself): its parent died while it
// was being started, and then it has no parent-death signal, since
// ForkExec's check for a parent that died before the child armed it
// compares getppid, which is 0 in a new PID namespace, and its signal to
// itself, PID 1 there, is dropped. The nonce, written once the exec is
// done, is what proves the signal armed.
func IsInit() bool {
	if !checked.done {
		checked.done = true
		v := os.Getenv(Env)
		checked.marked = v != "" && os.Getpid() == 1 && os.Getppid() == 0 && handshakePipe()
		checked.verified = checked.marked && handshake(v)
	}
	return checked.marked
}

// handshakePipe reports whether HandshakeFD is a pipe, as the supervisor
// that starts an init leaves it: the variable alone, in a namespace that
// someone else made (unshare), does not make leaderrun an init.
func handshakePipe() bool {
	var st unix.Stat_t
	return unix.Fstat(HandshakeFD, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// handshake reports whether the nonce of the Env value v came on the
// handshake pipe within HandshakeWait. IsInit calls it only once
// handshakePipe has found the pipe.
func handshake(v string) bool {
	_, _, _, nonce, ok := parseEnv(v)
	if !ok {
		return false
	}
	if unix.SetNonblock(HandshakeFD, true) != nil {
		return false
	}
	fds := []unix.PollFd{{Fd: HandshakeFD, Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int(HandshakeWait.Milliseconds())); err != nil || n != 1 {
		return false
	}
	// One byte more than the nonce tells a longer write. A prepared
	// init's word cannot be there yet: it comes after the ready line,
	// which follows this.
	buf := make([]byte, len(nonce)+1)
	n, _ := unix.Read(HandshakeFD, buf)
	if os.Getenv(PreparedEnv) == "" {
		unix.Close(HandshakeFD)
	}
	if n != len(nonce) {
		return false
	}
	var diff byte // compared in constant time
	for i := range n {
		diff |= buf[i] ^ nonce[i]
	}
	return diff == 0
}

// Run is the init: it runs the command named by its arguments (os.Args[1]
// the path, os.Args[2:] its argv), and returns the exit code for this
// process: the command's, which stands when the parent reads no valid
// report. It subscribes to every signal itself, before it reports Ready.
//
// The status pipe is the init's alone: it is closed in the command when
// that execs, so that the command cannot write its own end; and the init
// never waits for room in it, so that its exit, which ends the command's
// whole tree, never waits on what the pipe holds.
func Run() int {
	if IsInit(); !checked.verified {
		os.Stderr.WriteString("leaderrun: namespace init: no nonce from the leaderrun that started it (it died, " +
			"or took longer than " + HandshakeWait.String() + "): exiting without running the command\n")
		return 125
	}
	fd, stopSig, grace, _, ok := parseEnv(os.Getenv(Env))
	os.Unsetenv(Env)
	prepared := os.Getenv(PreparedEnv) != ""
	os.Unsetenv(PreparedEnv)
	if !ok || len(os.Args) < 3 {
		os.Stderr.WriteString("leaderrun: namespace init: bad arguments\n")
		return 125
	}
	// Run from a memfd through /proc/self/fd/N, the init's name would be N.
	name := []byte("leaderrun-init\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	syscall.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		os.Stderr.WriteString("leaderrun: namespace init: status pipe: " + err.Error() + "\n")
		return 125
	}
	defer unix.Close(fd)
	stops := stopsPipe()
	sigState := takeSignals(SignalsEnv)
	// From now on a signal is forwarded, not lost (the kernel drops a
	// signal to a namespace's init that has no handler for it).
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	report(fd, Ready)
	if stopSig == 0 { // a probe's init: it only proves it could start
		report(fd, EncodeStatus(0, 0))
		return 0
	}
	RemountProc()
	env := os.Environ()
	if prepared {
		if env, ok = awaitGo(); !ok {
			return 0 // the supervisor gave this start up
		}
	}

	// The command's Pdeathsig belongs to the thread that forks it, and the
	// capabilities it must not inherit are that thread's: it is this one,
	// never unlocked.
	runtime.LockOSThread()
	c := &command{tty: newTerminal(), stops: stops}
	if code := c.start(os.Args[1], os.Args[2:], env, sigState, sigs); code != 0 {
		report(fd, EncodeStatus(code, 0))
		return code
	}
	report(fd, EncodeStarted(c.pid))
	// Started: what the init still runs is a small loop, which needs no
	// directory. The command keeps the one it was started in; the init
	// moves to /, as dumb-init does, so as not to keep that one busy (a
	// mount point that could not be unmounted, say).
	unix.Chdir("/")
	shed.Executable()
	poll := time.NewTicker(time.Second) // SIGCHLD may be lost in a full channel
	defer poll.Stop()
	for !c.reap() {
		select {
		case s := <-sigs:
			switch sig := s.(syscall.Signal); sig {
			case syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPIPE:
				// reaped below; the Go runtime's; a pipe's, as EPIPE
			case syscall.SIGTSTP:
				c.signal(syscall.SIGSTOP) // SIGSTOP would stop the init, not the command
			case syscall.SIGCONT:
				c.giveTerminal() // resumed by fg: the terminal goes back first
				c.signal(sig)
			default:
				c.signal(sig)
			}
		case <-poll.C:
		}
	}
	c.stopLeftovers(stopSig, grace)
	c.reclaimTerminal(false)
	report(fd, EncodeStatus(c.code, c.sig))
	if c.sig != 0 {
		return 128 + int(c.sig)
	}
	return c.code
}

// awaitGo waits, in a prepared init, for the supervisor's word to run the
// command, and returns the command's environment. The handshake pipe's end
// without the word (the supervisor gave this start up, or died) or a word
// longer than maxGo: false, and nothing runs. It reads on this thread,
// blocking: every way a prepared start ends closes the pipe.
func awaitGo() ([]string, bool) {
	defer unix.Close(HandshakeFD) // the command must not inherit it
	if unix.SetNonblock(HandshakeFD, false) != nil {
		return nil, false
	}
	var b []byte
	buf := make([]byte, 64<<10)
	for len(b) <= maxGo+32 {
		n, err := unix.Read(HandshakeFD, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			break
		}
		b = append(b, buf[:n]...)
	}
	return decodeGo(b)
}

// report writes line, shorter than PIPE_BUF, to the status pipe fd in one
// write that is whole or nothing: a full pipe (nothing but the init ever
// writes to it) drops the line instead of blocking.
func report(fd int, line string) {
	unix.Write(fd, []byte(line))
}

// stopsPipe returns the descriptor of the supervisor's StopsEnv, or -1.
func stopsPipe() int {
	v := os.Getenv(StopsEnv)
	os.Unsetenv(StopsEnv)
	fd, err := strconv.Atoi(v)
	if v == "" || err != nil || fd < 3 {
		return -1
	}
	syscall.CloseOnExec(fd)
	return fd
}

// RemountProc gives the namespace its own /proc, so that the command sees
// its own pids there. It is best effort: without it /proc is the host's.
// The mounts become slaves, not private: what the host mounts later still
// appears to the command, and the new /proc never appears to the host.
func RemountProc() {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return
	}
	unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// command is the init's one child.
type command struct {
	pid      int
	live     bool
	code     int            // its exit code, once reaped
	sig      syscall.Signal // the signal that killed it, once reaped
	tty      *terminal      // nil unless stdin is the controlling terminal
	stops    int            // StopsEnv's descriptor, or -1
	ttyWants bool           // it waits, stopped, for the terminal
	ttyHolds bool           // its group was made the foreground group
}

// start forks and execs the command in a process group of its own, with
// the signal state s (the ignored signals go on to sigs once it is
// forked), and returns 0, or the exit code of a command that could not
// start (127 not found, else 126), having said why on stderr.
func (c *command) start(path string, argv, env []string, s signalState, sigs chan<- os.Signal) int {
	if err := dropInheritedCaps(); err != nil {
		os.Stderr.WriteString("leaderrun: namespace init: " + err.Error() + "\n")
		return 126
	}
	kept := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, TagEnv+"=") {
			kept = append(kept, kv)
		}
	}
	// While the command forks, this thread blocks what it is to block
	// (the fork inherits the thread's mask), and the signals it is to
	// ignore are ignored: one that comes meanwhile is lost, as the command
	// would have ignored it.
	undo := s.apply(sigs)
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   kept,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	undo()
	if err != nil {
		return startFailed(path, err)
	}
	c.pid, c.live = pid, true
	return 0
}

// dropInheritedCaps clears the calling thread's ambient and inheritable
// capabilities, which a user namespace's init was given to mount /proc:
// the command forked from this thread must not inherit them.
func dropInheritedCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[0].Inheritable == 0 && data[1].Inheritable == 0 {
		return nil
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// reap collects every process that has ended (the namespace's orphans are
// this init's children) and reports whether the command has.
func (c *command) reap() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WUNTRACED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return !c.live
		}
		if pid != c.pid || !c.live {
			continue
		}
		switch {
		case ws.Stopped():
			c.jobStopped(ws.StopSignal())
		case ws.Signaled():
			c.live, c.sig = false, ws.Signal()
		default:
			c.live, c.code = false, ws.ExitStatus()
		}
	}
}

// signal sends sig to the command's process group, and to the command
// itself if it left that group, while it lives.
func (c *command) signal(sig syscall.Signal) {
	if !c.live {
		return
	}
	unix.Kill(-c.pid, sig)
	if pgid, err := unix.Getpgid(c.pid); err == nil && pgid != c.pid {
		unix.Kill(c.pid, sig)
	}
}

// stopLeftovers gives what is left of the command's process group, once
// the command has been reaped, the stop signal (then SIGCONT, so that a
// stopped group can act on it) and grace to end, then SIGKILL. What escaped
// the group dies with the init.
func (c *command) stopLeftovers(sig syscall.Signal, grace time.Duration) {
	if unix.Kill(-c.pid, sig) != nil {
		return // the group is empty
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
		unix.Kill(-c.pid, syscall.SIGCONT)
	}
	deadline := time.Now().Add(grace)
	for unix.Kill(-c.pid, 0) != unix.ESRCH {
		if time.Now().After(deadline) {
			unix.Kill(-c.pid, syscall.SIGKILL)
			return
		}
		time.Sleep(10 * time.Millisecond)
		c.reap() // a zombie still counts in its group
	}
}

// startFailed says on stderr why the command at path could not start, and
// returns the exit code for it: 127 when it was not found, else 126.
func startFailed(path string, err error) int {
	os.Stderr.WriteString("leaderrun: start " + strconv.Quote(path) + ": " + err.Error() + "\n")
	if err == syscall.ENOENT || err == syscall.ENOTDIR {
		return 127
	}
	return 126
}
