package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/signals"
)

// sigMode is a way leaderrun runs, for the signal tests.
type sigMode struct {
	name string
	pid1 bool   // as PID 1 of a PID namespace of its own (unshare), as in a container
	pidn string // LEADERRUN_PID_NAMESPACE; empty leaves it unset: the default
}

var sigModes = []sigMode{
	{name: "default"}, // the command under a namespace's init (as root)
	{name: "pid1", pid1: true, pidn: "false"},
	{name: "no-namespace", pidn: "false"},
}

// TestSignalsAsTheTableSays sends every signal from 1 to 31 but SIGKILL
// with kill(2) to a leaderrun that leads, in each mode, and checks that it
// does what docs/signals.md's table (signals.WriteTable, from the same
// code) says: a forwarded signal reaches the command, an ignored one does not
// and leaderrun runs on, a stop signal stops the command with the signal
// the table names and releases the lease, a suspend or a kernel stop stops
// leaderrun until SIGCONT. leaderrun never crashes.
func TestSignalsAsTheTableSays(t *testing.T) {
	if testing.Short() {
		t.Skip("runs leaderrun processes")
	}
	for _, m := range sigModes {
		t.Run(m.name, func(t *testing.T) {
			requireMode(t, m)
			t.Run("caught", func(t *testing.T) { checkCaught(t, m) })
			for n := syscall.Signal(1); n <= 31; n++ {
				if signals.DefaultStopOn.Action(n) == signals.Stop {
					t.Run(signals.Name(n), func(t *testing.T) { checkStop(t, m, n) })
				}
			}
		})
	}
}

// checkCaught sends one leaderrun every signal that does not end it, in
// order, each checked before the next is sent.
func checkCaught(t *testing.T, m sigMode) {
	l := startLeaderrun(t, m, "caught", nil, "lrchild", "-catch-all", "-exit-on", "INT,TERM")
	child := l.child()
	marker := func() { // a forwarded signal that comes back proves the one before was handled
		l.sendAndAwait(syscall.SIGUSR1)
	}
	for n := syscall.Signal(1); n <= 31; n++ {
		action := signals.DefaultStopOn.Action(n)
		name := signals.Name(n)
		switch {
		case n == syscall.SIGKILL || action == signals.Stop:
			continue // SIGKILL cannot be caught; stops have tests of their own
		case action == signals.Forward:
			l.sendAndAwait(n)
		case action == signals.Ignore, action == signals.Kernel && m.pid1 && n != syscall.SIGSTOP:
			// (The kernel drops a signal that a namespace's init does
			// not catch; it forces only SIGKILL and SIGSTOP on it.)
			l.kill(n)
			marker()
			if got := l.received(name); got != 0 {
				t.Errorf("%s: the command received it %d times; the table says %s", name, got, action)
			}
			if st := procState(l.pid); st == 'T' {
				t.Errorf("%s: leaderrun is stopped; the table says %s", name, action)
			}
		case action == signals.Suspend:
			l.kill(n)
			l.await(name+": the command stopped", func() bool { return procState(child) == 'T' })
			if !m.pid1 {
				l.await(name+": leaderrun stopped", func() bool { return procState(l.pid) == 'T' })
			}
			l.kill(syscall.SIGCONT)
			l.await(name+": the command resumed by SIGCONT", func() bool { return procState(child) != 'T' })
			l.await(name+": leaderrun resumed by SIGCONT", func() bool { return procState(l.pid) != 'T' })
		case action == signals.Kernel:
			l.kill(n)
			l.await(name+": leaderrun stopped", func() bool { return procState(l.pid) == 'T' })
			l.kill(syscall.SIGCONT)
			l.await(name+": leaderrun resumed by SIGCONT", func() bool { return procState(l.pid) != 'T' })
			marker()
		default:
			t.Fatalf("%s: no check for action %s", name, action)
		}
	}
	l.kill(syscall.SIGTERM)
	if got := l.wait(); got != 0 {
		t.Errorf("leaderrun exited with %d after SIGTERM, want the command's 0", got)
	}
	l.released()
}

// checkStop sends the stop signal sig to a leaderrun that leads.
func checkStop(t *testing.T, m sigMode, sig syscall.Signal) {
	l := startLeaderrun(t, m, "stop", nil, "lrchild", "-catch-all", "-exit-on", "INT,TERM")
	l.kill(sig)
	if got := l.wait(); got != 0 {
		t.Errorf("leaderrun exited with %d after %s, want the command's 0", got, signals.Name(sig))
	}
	want := signals.Name(signals.PassOn(sig, syscall.SIGTERM))
	if got := l.received(want); got != 1 {
		t.Errorf("the command received %s %d times, want once", want, got)
	}
	if want != signals.Name(sig) && l.received(signals.Name(sig)) != 0 {
		t.Errorf("the command received %s; it should have got %s in its place", signals.Name(sig), want)
	}
	l.released()
}

// TestCrashSignals sends each of the signals that the Go runtime takes for
// a fault (ILL, TRAP, ABRT, BUS, FPE, SEGV, STKFLT, SYS) with kill(2) to a
// leaderrun --once whose command keeps their default actions: in every
// mode, and to the namespace's init of the default mode too. leaderrun
// forwards it and the command dies by it; leaderrun never crashes (no Go
// stack dump, no exit 2), releases the lease and passes the command's
// signal on (as PID 1, 128+N).
func TestCrashSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs leaderrun processes")
	}
	// No core files from the commands that die.
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	crash := []syscall.Signal{syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGBUS,
		syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSTKFLT, syscall.SIGSYS}
	targets := append(sigModes, sigMode{name: "namespace-init"})
	for _, m := range targets {
		t.Run(m.name, func(t *testing.T) {
			requireMode(t, m)
			for _, sig := range crash {
				t.Run(signals.Name(sig), func(t *testing.T) {
					l := startLeaderrun(t, m, "crash", []string{"--once"},
						"sh", "-c", `echo $$ >"$READY"; exec sleep 600`)
					target := l.pid
					if m.name == "namespace-init" {
						target = l.descendant("leaderrun")
					}
					if err := syscall.Kill(target, sig); err != nil {
						t.Fatal(err)
					}
					if got, want := l.wait(), 128+int(sig); got != want {
						t.Errorf("leaderrun's status = %d, want %d (the command's death by %s passed on)", got, want, signals.Name(sig))
					}
					l.released()
					if !strings.Contains(l.log(), "command killed by "+signals.Name(sig)+"; leaderrun exits") {
						t.Errorf("no line saying leaderrun passes on its command's %s:\n%s", signals.Name(sig), l.log())
					}
				})
			}
		})
	}
}

// requireMode skips a mode this machine cannot run.
func requireMode(t *testing.T, m sigMode) {
	if m.pid1 && exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run() != nil {
		t.Skip("unshare --pid --fork --mount-proc is not permitted here")
	}
	if m.pidn == "" && os.Geteuid() != 0 {
		t.Skip("the default mode's PID namespace is checked as root")
	}
}

// leaderrunProc is a leaderrun process a signal test started.
type leaderrunProc struct {
	t       *testing.T
	mode    sigMode
	pid     int // leaderrun's pid in this PID namespace
	dir     string
	logPath string
	done    chan struct{}
	status  int // as a shell reports it; set when done is closed
}

// startLeaderrun starts leaderrun in mode m with options opts and the
// command, and returns once the command is ready: it wrote $READY.
func startLeaderrun(t *testing.T, m sigMode, name string, opts []string, command ...string) *leaderrunProc {
	t.Helper()
	dir := t.TempDir()
	l := &leaderrunProc{t: t, mode: m, dir: dir, logPath: filepath.Join(dir, "leaderrun.log"), done: make(chan struct{})}
	ready := filepath.Join(dir, "ready")
	if command[0] == "lrchild" {
		command = append(command, "-ready", ready, "-record", filepath.Join(dir, "received"))
	}
	args := append([]string{"leaderrun", "--name", name, "--ttl", "120s", "--kill-grace", "30s"}, opts...)
	args = append(append(args, "--"), command...)
	if m.pid1 {
		args = append([]string{"unshare", "--pid", "--fork", "--mount-proc"}, args...)
	}
	c := exec.Command(args[0], args[1:]...)
	c.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEADERRUN_") && !strings.HasPrefix(kv, "GODEBUG=") {
			c.Env = append(c.Env, kv)
		}
	}
	// No SIGURG of the Go runtime's own in what the command records.
	c.Env = append(c.Env, "GODEBUG=asyncpreemptoff=1", "READY="+ready,
		"LEADERRUN_STORE=sqlite:"+filepath.Join(dir, "leases.db"))
	if m.pidn != "" {
		c.Env = append(c.Env, "LEADERRUN_PID_NAMESPACE="+m.pidn)
	}
	logf, err := os.Create(l.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	c.Stdout, c.Stderr = logf, logf
	// A process group of its own, whose parent (this test) is in
	// another group of the same session: not orphaned, so that the
	// kernel's job control stops apply to it as the table says.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Wait()
		ws := c.ProcessState.Sys().(syscall.WaitStatus)
		l.status = ws.ExitStatus()
		if ws.Signaled() {
			l.status = 128 + int(ws.Signal())
		}
		close(l.done)
	}()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			if l.pid != 0 {
				syscall.Kill(l.pid, syscall.SIGKILL)
			}
			<-l.done
		}
	})
	l.pid = c.Process.Pid
	if m.pid1 {
		l.pid = 0
		l.await("unshare's child", func() bool { l.pid = firstChild(c.Process.Pid); return l.pid != 0 })
	}
	l.await("the command ready", func() bool {
		fi, err := os.Stat(ready)
		return err == nil && fi.Size() > 0
	})
	return l
}

// await waits until ok, failing the test when leaderrun exits first or
// after waitLimit.
func (l *leaderrunProc) await(what string, ok func() bool) {
	l.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !ok() {
		select {
		case <-l.done:
			if ok() {
				return
			}
			l.t.Fatalf("waiting for %s: leaderrun exited with %d:\n%s", what, l.status, l.log())
		default:
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("timed out after %v waiting for %s:\n%s", waitLimit, what, l.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *leaderrunProc) kill(sig syscall.Signal) {
	l.t.Helper()
	if err := syscall.Kill(l.pid, sig); err != nil {
		l.t.Fatalf("kill %d %s: %v", l.pid, signals.Name(sig), err)
	}
}

// sendAndAwait sends sig and waits until the command has received it once
// more.
func (l *leaderrunProc) sendAndAwait(sig syscall.Signal) {
	l.t.Helper()
	name := signals.Name(sig)
	before := l.received(name)
	l.kill(sig)
	l.await(name+" forwarded to the command", func() bool { return l.received(name) > before })
}

// received counts the times the command recorded the signal name.
func (l *leaderrunProc) received(name string) int {
	data, _ := os.ReadFile(filepath.Join(l.dir, "received"))
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == name {
			n++
		}
	}
	return n
}

// wait returns leaderrun's exit status as a shell reports it.
func (l *leaderrunProc) wait() int {
	l.t.Helper()
	select {
	case <-l.done:
	case <-time.After(waitLimit):
		l.t.Fatalf("leaderrun still runs after %v:\n%s", waitLimit, l.log())
	}
	return l.status
}

// released checks, once leaderrun has exited, that it released the lease
// and did not crash.
func (l *leaderrunProc) released() {
	l.t.Helper()
	log := l.log()
	if strings.Contains(log, "goroutine ") || l.status == 2 {
		l.t.Errorf("leaderrun crashed (status %d):\n%s", l.status, log)
	}
	if !strings.Contains(log, `msg="tenure over; released the lease"`) {
		l.t.Errorf("leaderrun did not release the lease:\n%s", log)
	}
}

func (l *leaderrunProc) log() string {
	data, _ := os.ReadFile(l.logPath)
	return string(data)
}

// child is the host pid of the command (lrchild).
func (l *leaderrunProc) child() int { return l.descendant("lrchild") }

// descendant returns the pid of leaderrun's first descendant whose argv[0]
// is argv0.
func (l *leaderrunProc) descendant(argv0 string) int {
	l.t.Helper()
	var found int
	l.await("a descendant "+argv0, func() bool {
		found = findDescendant(l.pid, argv0)
		return found != 0
	})
	return found
}

func findDescendant(pid int, argv0 string) int {
	for _, c := range children(pid) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
		if first, _, _ := strings.Cut(string(cmdline), "\x00"); filepath.Base(first) == argv0 {
			return c
		}
		if d := findDescendant(c, argv0); d != 0 {
			return d
		}
	}
	return 0
}

func firstChild(pid int) int {
	if c := children(pid); len(c) > 0 {
		return c[0]
	}
	return 0
}

// children lists pid's children, from each of its threads.
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// procState is the state letter of pid in /proc/PID/stat ('T' stopped), or
// 0 when it has gone.
func procState(pid int) byte {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if i := strings.LastIndexByte(line, ')'); i >= 0 && len(line) > i+2 {
		return line[i+2]
	}
	return 0
}
