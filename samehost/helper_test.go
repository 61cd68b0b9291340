//go:build linux

package samehost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
	"github.com/leaderrun/leaderrun/internal/procstat"
	"github.com/leaderrun/leaderrun/internal/testenv/cgrouptest"
	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// The test binary plays the processes of a tenure, by LOCAL_TEST_ROLE:
//
//	holder:  a leaderrun stand-in; starts a command in a group of its own
//	         with Pdeathsig (as supervise does), reaps it, and sleeps;
//	command: starts a sleeper in its own group (unless LOCAL_TEST_ALONE
//	         is set), writes "command sleeper" pids to LOCAL_TEST_PIDS,
//	         and sleeps;
//	sleeper: sleeps;
//	fifo-reader: a daemon with a FIFO of its own (readFIFO, end_test.go);
//	follower: proves a holder dead (follow, end_test.go).
func TestMain(m *testing.M) {
	switch os.Getenv("LOCAL_TEST_ROLE") {
	case "holder":
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "LOCAL_TEST_ROLE=command")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cgroup := ""
		if base := os.Getenv("LOCAL_TEST_CGROUPS"); base != "" {
			// As a leaderrun would: a cgroup named after this holder.
			self, err := thisProcess()
			if err != nil {
				os.Exit(4)
			}
			cgroup = fmt.Sprintf("%s/leaderrun-%d-%d-%d-1", base, self.PIDNS, self.Pid, self.Start)
			if err := os.Mkdir(cgroup, 0o755); err != nil {
				os.Exit(4)
			}
			fd, err := syscall.Open(cgroup, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
			if err != nil {
				os.Exit(4)
			}
			c.SysProcAttr.UseCgroupFD, c.SysProcAttr.CgroupFD = true, fd
		}
		c.Env = append(c.Env, "LOCAL_TEST_CGROUP="+cgroup)
		var end *EndSignal
		if os.Getenv("LOCAL_TEST_END") != "" {
			var err error
			if end, err = NewEndSignal(); err != nil {
				os.Exit(5)
			}
			w := end.Mark(Where{})
			path := os.Getenv("LOCAL_TEST_PIDS") + ".end"
			os.WriteFile(path+".tmp", fmt.Appendf(nil, "%d %s", w.EndIno, w.EndPath), 0o644)
			os.Rename(path+".tmp", path)
		}
		// SIGUSR1: end the tenure as leaderrun does (the command's whole
		// tree killed and gone, then the end signal); SIGUSR2: send the
		// end signal with the command still running; SIGHUP: say that
		// the tenure is ending, as leaderrun does when a stop signal
		// comes, and do nothing else. Subscribed before the command
		// starts: a test signals the holder once the command has said
		// its pids.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
		if err := c.Start(); err != nil {
			os.Exit(3)
		}
		reaped := make(chan struct{})
		go func() { c.Wait(); close(reaped) }()
		for sig := range sigs {
			if sig == syscall.SIGHUP {
				end.Stopping()
				continue
			}
			if sig == syscall.SIGUSR1 {
				if cgroup != "" {
					killCgroup(context.Background(), cgroup)
				} else {
					syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				}
				<-reaped
			}
			end.Send()
		}
		sleepForever()
	case "command":
		sleeper := 0
		if os.Getenv("LOCAL_TEST_ALONE") == "" {
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), "LOCAL_TEST_ROLE=sleeper")
			// An escapee leaves the command's session and group.
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: os.Getenv("LOCAL_TEST_ESCAPEE") != ""}
			if err := c.Start(); err != nil {
				os.Exit(3)
			}
			sleeper = c.Process.Pid
		}
		path := os.Getenv("LOCAL_TEST_PIDS")
		os.WriteFile(path+".tmp", fmt.Appendf(nil, "%d %d %s", os.Getpid(), sleeper, os.Getenv("LOCAL_TEST_CGROUP")), 0o644)
		os.Rename(path+".tmp", path)
		sleepForever()
	case "sleeper":
		sleepForever()
	case "fifo-reader":
		os.Exit(readFIFO())
	case "follower":
		os.Exit(follow())
	}
	// The holders' commands get their cgroups below the test binary's
	// own: no other leaderrun on the host kills or removes them for the
	// followers the tests play.
	var leave func()
	leave, testCgroupErr = cgrouptest.Enter()
	code := m.Run()
	leave()
	os.Exit(code)
}

// testCgroupErr is why the test binary runs in no cgroup of its own, or
// nil.
var testCgroupErr error

// sleepForever blocks for good (a bare select{} would be a deadlock the
// runtime ends).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// tenure is a running holder, its command and the command's sleeper.
type tenure struct {
	holder                *exec.Cmd
	command, sleeper      int
	where                 Where
	holderDone, cmdExited chan struct{}
}

// shape is how startTenure starts a tenure.
type shape struct {
	alone   bool // the command has no sleeper
	escapee bool // the sleeper leaves the command's session and group
	bare    bool // the command gets no cgroup of its own (else it must)
	end     bool // the holder has an end signal (SIGUSR1, SIGUSR2, SIGHUP)
	// prog is the holder's program (a copy of the test binary); "" for
	// the test binary itself. extra are files the holder inherits, from
	// descriptor 3 on.
	prog  string
	extra []*os.File
}

// startTenure starts a holder whose command, unless sh.bare, runs in a
// cgroup the holder made for it as leaderrun does (the test is skipped
// where cgroups cannot be made).
func startTenure(t *testing.T, sh shape) *tenure {
	t.Helper()
	pids := t.TempDir() + "/pids"
	prog := os.Args[0]
	if sh.prog != "" {
		prog = sh.prog
	}
	c := exec.Command(prog)
	c.ExtraFiles = sh.extra
	c.Env = append(os.Environ(), "LOCAL_TEST_ROLE=holder", "LOCAL_TEST_PIDS="+pids)
	if sh.alone {
		c.Env = append(c.Env, "LOCAL_TEST_ALONE=1")
	}
	if sh.escapee {
		c.Env = append(c.Env, "LOCAL_TEST_ESCAPEE=1")
	}
	if !sh.bare {
		c.Env = append(c.Env, "LOCAL_TEST_CGROUPS="+cgroupsForTest(t))
	}
	if sh.end {
		c.Env = append(c.Env, "LOCAL_TEST_END=1")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ten := &tenure{holder: c, holderDone: make(chan struct{})}
	go func() { c.Wait(); close(ten.holderDone) }()
	t.Cleanup(func() {
		c.Process.Kill()
		<-ten.holderDone
		for _, pid := range []int{ten.command, ten.sleeper} {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	var data []byte
	waitUntil(t, "the command's pids", func() bool {
		var err error
		data, err = os.ReadFile(pids)
		return err == nil
	})
	f := strings.Fields(string(data))
	ten.command, _ = strconv.Atoi(f[0])
	ten.sleeper, _ = strconv.Atoi(f[1])
	if len(f) > 2 {
		t.Cleanup(func() { killCgroup(context.Background(), f[2]) })
	}
	w, err := Here(ten.command, startOf(t, ten.command))
	if err != nil {
		t.Fatal(err)
	}
	w.Pid, w.Start = c.Process.Pid, startOf(t, c.Process.Pid)
	if sh.end {
		data, err := os.ReadFile(pids + ".end")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(string(data), &w.EndIno, &w.EndPath); err != nil {
			t.Fatal(err)
		}
	}
	ten.where = w
	return ten
}

// cgroupsForTest returns this process's cgroup directory, under which a
// holder may make its command's cgroup, or skips the test.
func cgroupsForTest(t *testing.T) string {
	t.Helper()
	root, err := cgroupv2.Root()
	if err != nil {
		t.Skip(err)
	}
	rel, ok := cgroupv2.Of("self")
	if !ok {
		t.Skip("no cgroup v2 hierarchy")
	}
	dir := filepath.Join(root, rel)
	probe, err := os.MkdirTemp(dir, "leaderrun-probe-")
	if err != nil {
		t.Skipf("cannot make cgroups here: %v", err)
	}
	os.Remove(probe)
	if testCgroupErr != nil {
		citest.Missing(t, "the test binary has no cgroup of its own, where other leaderruns on the host would not reclaim its holders' cgroups: %v", testCgroupErr)
	}
	return dir
}

func startOf(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Start
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// running reports whether pid runs and has not exited (a zombie has).
func running(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && st.State != 'Z' && st.State != 'X'
}

// lines is a slog handler that sends each message to a channel.
type lines chan string

func (l lines) Enabled(context.Context, slog.Level) bool { return true }
func (l lines) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Message:
	default:
	}
	return nil
}
func (l lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l lines) WithGroup(string) slog.Handler      { return l }

// expect waits for a log line starting with prefix.
func (l lines) expect(t *testing.T, prefix string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case msg := <-l:
			if strings.HasPrefix(msg, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no log line %q", prefix)
		}
	}
}
