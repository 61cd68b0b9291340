package supervise

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/cgrouptest"
	"github.com/leaderrun/leaderrun/signals"
	"golang.org/x/sys/unix"
)

// helperEnv selects a helper mode when the test binary runs as a child.
const helperEnv = "SUPERVISE_HELPER"

// quickRaceExit stops a helper built with -race from sleeping 1s at exit.
const quickRaceExit = "GORACE=atexit_sleep_ms=0"

func TestMain(m *testing.M) {
	if IsNamespaceInit() {
		os.Exit(RunInit())
	}
	useInitProgram(os.Getenv(testInitProgramEnv))
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[1:]))
	}
	var leave func()
	leave, testCgroupErr = cgrouptest.Enter()
	code := m.Run()
	reclaimTestCgroups()
	leave()
	os.Exit(code)
}

// reclaimTestCgroups removes the cgroups of the children that tests left
// without calling Stop, and of the helper supervisors that tests killed.
func reclaimTestCgroups() {
	base := cgroupBase
	if base == "" {
		return
	}
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if _, pid, _, ok := parseCgroupName(e.Name()); ok && pid == os.Getpid() {
			(&cgroup{dir: filepath.Join(base, e.Name()), fd: -1}).kill()
		}
	}
	removeDeadCgroups(base, slog.New(slog.DiscardHandler))
}

// helper runs the child named by mode and returns its exit code. Helpers that
// block signal readiness by writing a file, never by timing.
func helper(mode string, args []string) int {
	switch mode {
	case "exit": // exit CODE
		code, _ := strconv.Atoi(args[0])
		return code
	case "sleep": // sleep READY: write READY, then sleep; dies by SIGTERM
		writeFile(args[0], "ready")
		time.Sleep(time.Hour)
	case "ignore-term": // ignore-term READY
		signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM)
		writeFile(args[0], "ready")
		time.Sleep(time.Hour)
	case "record": // record FILE READY: append each forwarded signal's name to FILE
		c := make(chan os.Signal, 16)
		signals.Notify(c)
		writeFile(args[1], "ready")
		for sig := range c {
			if sig == syscall.SIGCONT {
				// Stop's wake-up of a stopped child, sent right after
				// the stop signal: it may come first.
				continue
			}
			appendFile(args[0], signals.Name(sig.(syscall.Signal))+"\n")
			if sig == syscall.SIGTERM {
				return 0
			}
		}
	case "spin": // spin READY: write READY, then keep one CPU busy; dies by SIGTERM
		writeFile(args[0], "ready")
		for {
		}
	case "env": // env FILE
		writeFile(args[0], strings.Join(os.Environ(), "\n"))
	case "escape": // escape PIDFILE: a grandchild in a new session, then sleep
		pid := spawn("sleep", []string{args[0] + ".grandchild-ready"}, &syscall.SysProcAttr{Setsid: true})
		ns, _ := os.Readlink("/proc/self/ns/pid")
		writeFile(args[0]+".pidns", ns)
		writeFile(args[0], strconv.Itoa(pid))
		time.Sleep(time.Hour)
	case "nest": // nest PIDFILE BARE: "nest-mid PIDFILE BARE" in our group, then sleep
		spawn("nest-mid", args, nil)
		time.Sleep(time.Hour)
	case "nest-mid": // nest-mid PIDFILE BARE: a grandchild in a new session (with only the helper's variables if BARE is 1); exit once PIDFILE.go exists
		cmd := exec.Command(os.Args[0], args[0]+".grandchild-ready")
		cmd.Env = helperEnviron(os.Environ(), "sleep")
		if args[1] == "1" {
			cmd.Env = helperEnviron(nil, "sleep")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		waitFileHelper(args[0] + ".grandchild-ready")
		writeFile(args[0], strconv.Itoa(cmd.Process.Pid))
		waitFileHelper(args[0] + ".go")
	case "orphan": // orphan PIDFILE GOFILE: a grandchild that exits once GOFILE exists; exit now
		pid := spawn("await", []string{args[1]}, nil)
		writeFile(args[0], strconv.Itoa(pid))
	case "abandon": // abandon PIDFILE LOG: leave a "record" grandchild in our group; exit
		pid := spawn("record", []string{args[1], args[0] + ".ready"}, nil)
		waitFileHelper(args[0] + ".ready")
		writeFile(args[0], strconv.Itoa(pid))
	case "await": // await FILE: exit once FILE exists
		for !exists(args[0]) {
			time.Sleep(5 * time.Millisecond)
		}
	case "supervise-ns": // supervise-ns PIDFILE: run "escape PIDFILE" under Start in a PID namespace
		c, err := Start(Spec{
			Path:      os.Args[0],
			Args:      []string{os.Args[0], args[0]},
			Env:       helperEnviron(os.Environ(), "escape"),
			Namespace: PIDNamespace,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		waitFileHelper(args[0] + ".grandchild-ready")
		writeFile(args[0]+".supervisor", strconv.Itoa(c.Pid()))
		time.Sleep(time.Hour)
	case "supervise": // supervise PIDFILE: run "sleep" under Start, churn threads, write its pid
		c, err := Start(Spec{
			Path: os.Args[0],
			Args: []string{os.Args[0], args[0] + ".child-ready"},
			Env:  helperEnviron(os.Environ(), "sleep"),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		waitFileHelper(args[0] + ".child-ready")
		churnThreads()
		writeFile(args[0], strconv.Itoa(c.Pid()))
		time.Sleep(time.Hour)
	case "cwd": // cwd FILE: write the working directory to FILE, then sleep
		wd, err := os.Getwd()
		if err != nil {
			panic(err)
		}
		writeFile(args[0], wd)
		time.Sleep(time.Hour)
	case "fd3": // fd3 FILE: write what descriptor 3 is ("" when none) to FILE, exit 7
		what, _ := os.Readlink("/proc/self/fd/3")
		writeFile(args[0], what)
		return 7
	case "supervise-pid1": // supervise-pid1 FILE IDLE: see supervisePID1
		return supervisePID1(args[0], args[1] == "1")
	case "reraise": // reraise SIGNAL (a name, or any number: no range check)
		sig, err := signals.Parse(args[0])
		if n, nerr := strconv.Atoi(args[0]); err != nil && nerr == nil {
			sig = syscall.Signal(n)
		}
		_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
		Reraise(Status{Signal: sig})
		return 99
	case "suspend-supervisor": // suspend-supervisor DIR NAMESPACE CGROUP: see suspendSupervisor
		return suspendSupervisor(args)
	case "tree": // tree DIR: see tickingTree
		return tickingTree(args)
	case "tick": // tick DIR: see tickingTree
		return tick(args)
	case "tty-session", "tty-shell", "tty-supervise", "tty-report":
		return ttyHelper(mode, args)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	return 0
}

// churnThreads makes the Go runtime destroy OS threads: a goroutine that
// exits while locked takes its thread with it. A child forked from one of
// those threads would get its Pdeathsig.
func churnThreads() {
	done := make(chan struct{})
	for range 200 {
		go func() {
			runtime.LockOSThread()
			done <- struct{}{}
		}()
		<-done
	}
}

// helperEnviron returns env set up to run the test binary in helper mode.
func helperEnviron(env []string, mode string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, helperEnv+"="+mode, quickRaceExit)
}

// spawn starts the test binary in helper mode and does not wait for it.
func spawn(mode string, args []string, attr *syscall.SysProcAttr) int {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = helperEnviron(os.Environ(), mode)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return cmd.Process.Pid
}

func writeFile(name, data string) {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		panic(err)
	}
}

func appendFile(name, data string) {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		panic(err)
	}
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func waitFileHelper(name string) {
	for !exists(name) {
		time.Sleep(5 * time.Millisecond)
	}
}

// Test-side helpers.

// testTimeout bounds every wait for an event in these tests. It is far
// above what the events take (milliseconds): at a load average of 25 on
// the 2-core CI machine a SIGKILLed namespace's cgroup took more than 10s
// to empty.
const testTimeout = 30 * time.Second

// startHelper starts the test binary as a child in the given helper mode.
func startHelper(t *testing.T, spec Spec, mode string, args ...string) *Child {
	t.Helper()
	spec.Path = os.Args[0]
	spec.Args = append([]string{os.Args[0]}, args...)
	if spec.Env == nil {
		spec.Env = os.Environ()
	}
	spec.Env = helperEnviron(spec.Env, mode)
	c, err := Start(spec)
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// waitFile waits for name to exist and returns its contents.
func waitFile(t *testing.T, name string) string {
	t.Helper()
	waitFor(t, "file "+filepath.Base(name), func() bool { return exists(name) })
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// waitFor polls cond until it holds or testTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", testTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDone waits for c.Done with a timeout.
func waitDone(t *testing.T, c *Child) Status {
	t.Helper()
	select {
	case <-c.Done():
		return c.Status()
	case <-time.After(testTimeout):
		t.Fatalf("child %d not done after %v", c.Pid(), testTimeout)
		return Status{}
	}
}

// stopWithin runs c.Stop with a timeout and returns its status and duration.
func stopWithin(t *testing.T, c *Child) (Status, time.Duration) {
	t.Helper()
	start := time.Now()
	ch := make(chan Status, 1)
	go func() { ch <- c.Stop() }()
	select {
	case st := <-ch:
		return st, time.Since(start)
	case <-time.After(testTimeout):
		t.Fatalf("Stop of child %d did not return within %v", c.Pid(), testTimeout)
		return Status{}, 0
	}
}

// gone reports whether no process (not even a zombie) has this pid.
func gone(pid int) bool {
	return unix.Kill(pid, 0) == unix.ESRCH
}

func readPid(t *testing.T, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
