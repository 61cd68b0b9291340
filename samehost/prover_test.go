//go:build linux

package samehost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

func record(w Where) lease.Record {
	return lease.Record{Name: "relay", Holder: "a", Token: 7, Remaining: time.Minute, Where: w.String()}
}

// proof is what Prove returned.
type proof struct {
	ended bool
	err   error
}

// prove runs Prove in the background and returns its result channel, once
// it watches the holder.
func prove(t *testing.T, ctx context.Context, rec lease.Record) <-chan proof {
	t.Helper()
	return proveEnding(t, ctx, rec, func() {})
}

// proveEnding is prove with the callback for the holder's word that its
// tenure is ending.
func proveEnding(t *testing.T, ctx context.Context, rec lease.Record, ending func()) <-chan proof {
	t.Helper()
	log := make(lines, 16)
	p := &Prover{Logger: slog.New(log)}
	done := make(chan proof, 1)
	go func() {
		ended, err := p.Prove(ctx, rec, ending)
		done <- proof{ended, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Prove returned %v before watching", r.err)
	case <-time.After(0):
	}
	log.expect(t, "watching the leader")
	return done
}

// returned waits for Prove's result, failing after 10 s: it did not return
// after what happened.
func returned(t *testing.T, done <-chan proof, after string) proof {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("Prove did not return after %s", after)
		return proof{}
	}
}

// TestProveKillsDeadHoldersTree: once the holder died, Prove returns only
// after the command and its sleeper are dead, the sleeper in the command's
// group (nothing else would kill it: Pdeathsig reaches the command only)
// or escaped from it (setsid: a group kill misses it; the cgroup the holder
// made for the command does not).
func TestProveKillsDeadHoldersTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		sh   shape
	}{
		{"sleeper in the command's group", shape{}},
		{"sleeper escaped to a session of its own", shape{escapee: true}},
		// Its death closes the end signal: that is no graceful end.
		{"a holder with an end signal, its command alone", shape{end: true, alone: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ten := startTenure(t, tc.sh)
			done := prove(t, t.Context(), record(ten.where))
			if err := ten.holder.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if r := returned(t, done, "the holder died"); r.err != nil || r.ended {
				t.Fatalf("Prove = %v, %v; want false, nil once the holder died", r.ended, r.err)
			}
			if running(ten.sleeper) || running(ten.command) {
				t.Errorf("after Prove, command running = %v, sleeper running = %v; want both dead",
					running(ten.command), running(ten.sleeper))
			}
			// The killed leader could not remove its end signal: the
			// follower that proved it dead does.
			if p := ten.where.EndPath; p != "" {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the dead leader's end signal %s is still there after Prove (%v)", p, err)
				}
			}
		})
	}
}

// TestProveRefusesCommandWithoutWholeTree: a command in the holder's own
// PID namespace and without a cgroup of its own (--pid-namespace=false,
// no cgroups) could leave a process behind that the group kill misses, so
// the follower must wait for the expiry.
func TestProveRefusesCommandWithoutWholeTree(t *testing.T) {
	ten := startTenure(t, shape{bare: true, escapee: true})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a Prove that watches returns only then
	defer cancel()
	_, err := (&Prover{}).Prove(ctx, record(ten.where), func() {})
	if !errors.Is(err, ErrUnprovable) || !strings.Contains(err.Error(), "no cgroup of its own") {
		t.Fatalf("Prove = %v, want ErrUnprovable saying the command has no cgroup of its own", err)
	}
	if !running(ten.command) || !running(ten.sleeper) {
		t.Errorf("a refused Prove signalled: command running %v, sleeper running %v", running(ten.command), running(ten.sleeper))
	}
}

func TestProveNeverOnStoppedHolder(t *testing.T) {
	ten := startTenure(t, shape{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := prove(t, ctx, record(ten.where))
	pid := ten.holder.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	waitUntil(t, "the holder to stop", func() bool {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return len(data) > 0 && stateOf(data) == 'T'
	})
	select {
	case r := <-done:
		t.Fatalf("Prove of a stopped holder = %v, want it to keep watching", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Errorf("Prove after its context ended = %v, want context.Canceled", r.err)
	}
	if !running(ten.command) || !running(ten.sleeper) {
		t.Error("Prove of a stopped holder killed its command or group")
	}
}

func stateOf(stat []byte) byte {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' && i+2 < len(stat) {
			return stat[i+2]
		}
	}
	return 0
}

func TestProveRefusesWhatItCannotVerify(t *testing.T) {
	ten := startTenure(t, shape{})
	// A process of the same user that is not the holder's command.
	stranger := exec.Command(os.Args[0])
	stranger.Env = append(os.Environ(), "LOCAL_TEST_ROLE=sleeper")
	stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stranger.Process.Kill(); stranger.Wait() }()
	spid := stranger.Process.Pid
	// A process that runs another program.
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	opid := other.Process.Pid
	self, err := thisProcess()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		edit      func(w *Where)
		elsewhere bool
		why       string
		gone      bool // the command named has exited: elect.ErrCommandGone
		otherNS   bool // elect.ErrOtherNamespace
	}{
		{"another boot", func(w *Where) { w.Boot = "00000000-0000-4000-8000-000000000000" }, true, "boot id", false, false},
		{"another PID namespace", func(w *Where) { w.PIDNS++ }, false, "PID namespace", false, true},
		{"the holder's start time differs (its pid reused)", func(w *Where) { w.Start++ }, false, "the leader: pid", false, false},
		{"the command's start time differs (its pid reused)", func(w *Where) { w.ChildStart-- }, false, "the leader's command: pid", false, false},
		{"no such command (it exited)", func(w *Where) { w.Child, w.Pgid = 1<<22, 1<<22 }, false, "pidfd_open", true, false},
		{"a stranger with a wrong start time as the command", func(w *Where) { w.Child, w.Pgid, w.ChildStart = spid, spid, startOf(t, spid)+1 }, false, "started at tick", false, false},
		{"a stranger that is not the holder's child as the command", func(w *Where) {
			w.Child, w.Pgid, w.ChildStart = spid, spid, startOf(t, spid)
		}, false, "is a child of", false, false},
		{"a holder that runs another program", func(w *Where) { w.Pid, w.Start = opid, startOf(t, opid) }, false, `runs "sleep"`, false, false},
		{"a holder that is this process", func(w *Where) { w.Pid, w.Start = self.Pid, self.Start }, false, "is this process", false, false},
		{"a command that does not lead its group", func(w *Where) { w.Pgid = w.Pid }, false, "does not lead", false, false},
		{"no such holder", func(w *Where) { w.Pid = 1 << 22 }, false, "pidfd_open", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ten.where
			tc.edit(&w)
			// A Prove that took the record for true would watch until
			// the holder's death: bounded, it fails the test instead.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := (&Prover{}).Prove(ctx, record(w), func() {})
			if !errors.Is(err, ErrUnprovable) {
				t.Fatalf("Prove = %v, want ErrUnprovable", err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Prove = %v, want it to say %q", err, tc.why)
			}
			if got := errors.Is(err, elect.ErrElsewhere); got != tc.elsewhere {
				t.Errorf("Prove = %v: ErrElsewhere %v, want %v", err, got, tc.elsewhere)
			}
			if got := errors.Is(err, elect.ErrCommandGone); got != tc.gone {
				t.Errorf("Prove = %v: ErrCommandGone %v, want %v", err, got, tc.gone)
			}
			if got := errors.Is(err, elect.ErrOtherNamespace); got != tc.otherNS {
				t.Errorf("Prove = %v: ErrOtherNamespace %v, want %v", err, got, tc.otherNS)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		rec := record(ten.where)
		rec.Where += " "
		if _, err := (&Prover{}).Prove(t.Context(), rec, func() {}); !errors.Is(err, ErrUnprovable) {
			t.Errorf("Prove = %v, want ErrUnprovable", err)
		}
	})
	if !running(spid) || !running(ten.command) || !running(ten.sleeper) {
		t.Errorf("a refused Prove signalled: stranger %v, command %v, sleeper %v running; want all",
			running(spid), running(ten.command), running(ten.sleeper))
	}
}

// TestProveSparesProcessThatReusedCommandsPid reuses the pid of a dead
// holder's command, and its process group's number, for a process of
// another tenure that leads a group of its own: the proof, holding a
// pidfd on the command from before, must not signal it.
func TestProveSparesProcessThatReusedCommandsPid(t *testing.T) {
	ten := startTenure(t, shape{alone: true})
	done := prove(t, t.Context(), record(ten.where))
	// The command dies and its holder reaps it; its pid is free.
	syscall.Kill(ten.command, syscall.SIGKILL)
	waitUntil(t, "the command to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", ten.command))
		return err != nil
	})
	reuser := startWithPid(t, ten.command)
	if err := ten.holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := returned(t, done, "the holder died"); r.err != nil {
		t.Fatalf("Prove = %v, want nil (the command and its group are gone)", r.err)
	}
	if !running(reuser) {
		t.Fatalf("the process that reused pid %d was killed", reuser)
	}
}

// startWithPid starts a process in a group of its own with pid (set with
// ns_last_pid, which needs root; the test is skipped without it) and
// returns its pid.
func startWithPid(t *testing.T, pid int) int {
	t.Helper()
	for range 100 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "LOCAL_TEST_ROLE=sleeper")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
			return pid
		}
		c.Process.Kill() // another process took the pid first
		c.Wait()
	}
	t.Fatalf("could not start a process with pid %d", pid)
	return 0
}

// TestProveTakesEndedTenure: a holder that ends its tenure as leaderrun
// does (its command's whole tree gone, then its end signal) is proved
// done at once, alive, without a signal sent.
func TestProveTakesEndedTenure(t *testing.T) {
	for _, tc := range []struct {
		name string
		sh   shape
	}{
		{"command in a cgroup", shape{end: true}},
		{"command with an escaped sleeper", shape{end: true, escapee: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ten := startTenure(t, tc.sh)
			done := prove(t, t.Context(), record(ten.where))
			if err := ten.holder.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			if r := returned(t, done, "the holder ended its tenure"); r.err != nil || !r.ended {
				t.Fatalf("Prove = %v, %v; want true, nil once the holder ended its tenure", r.ended, r.err)
			}
			if !running(ten.holder.Process.Pid) {
				t.Error("the holder is dead; want it alive (nothing may signal it)")
			}
			if running(ten.command) || running(ten.sleeper) {
				t.Errorf("command running %v, sleeper running %v: the holder's end came before its tree was gone",
					running(ten.command), running(ten.sleeper))
			}
		})
	}
}

// TestProveLetsOneFollowerTakeEndedTenure: of two followers that read the
// same end signal, one proves the tenure ended and the other leaves the
// name to it (elect.ErrOtherTakes).
func TestProveLetsOneFollowerTakeEndedTenure(t *testing.T) {
	ten := startTenure(t, shape{end: true})
	a := prove(t, t.Context(), record(ten.where))
	b := prove(t, t.Context(), record(ten.where))
	if err := ten.holder.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	ra, rb := returned(t, a, "the holder ended its tenure"), returned(t, b, "the holder ended its tenure")
	if ra.err == nil && rb.err == nil {
		t.Fatalf("Prove = %v, %v and %v, %v; want one of the followers to leave the name to the other", ra.ended, ra.err, rb.ended, rb.err)
	}
	if ra.err != nil {
		ra, rb = rb, ra
	}
	if !ra.ended || ra.err != nil || rb.ended || !errors.Is(rb.err, elect.ErrOtherTakes) {
		t.Fatalf("Prove = %v, %v and %v, %v; want true, nil and false, ErrOtherTakes", ra.ended, ra.err, rb.ended, rb.err)
	}
}

// TestProveLetsOneFollowerTakeNameAtStoppingWord: at the holder's word
// that it is stopping its command, one of two followers is told that it
// may take the name (ending), and returns only once the holder's tree is
// gone. The other leaves the name to it (elect.ErrOtherTakes), at the word
// or, should the taker have read its copy, at the end; after the holder's
// death it proves that death too, as in a crash.
func TestProveLetsOneFollowerTakeNameAtStoppingWord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		end   func(*tenure) error // how the tenure ends after the word
		want  proof               // the taker's
		other proof               // the other's, if it did not return at the word
	}{
		{"the holder ends its tenure", func(ten *tenure) error { return ten.holder.Process.Signal(syscall.SIGUSR1) },
			proof{ended: true}, proof{err: elect.ErrOtherTakes}},
		{"the holder dies", func(ten *tenure) error { return ten.holder.Process.Kill() }, proof{}, proof{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ten := startTenure(t, shape{end: true})
			told := make(chan string, 2)
			a := proveEnding(t, t.Context(), record(ten.where), func() { told <- "a" })
			b := proveEnding(t, t.Context(), record(ten.where), func() { told <- "b" })
			if err := ten.holder.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			var taker string
			select {
			case taker = <-told:
			case <-time.After(10 * time.Second):
				t.Fatal("no follower was told at the stopping word that it may take the name")
			}
			taking, other := a, b
			if taker == "b" {
				taking, other = b, a
			}
			select {
			case r := <-taking:
				t.Fatalf("the taker's Prove = %v, %v while the command still runs; want it to wait for the tree's end", r.ended, r.err)
			case <-time.After(300 * time.Millisecond):
			}
			otherWant, otherDone := tc.other, false
			select {
			case r := <-other:
				otherWant, otherDone = proof{err: elect.ErrOtherTakes}, true
				if r.ended || !errors.Is(r.err, elect.ErrOtherTakes) {
					t.Fatalf("the other follower's Prove = %v, %v at the word; want false, ErrOtherTakes", r.ended, r.err)
				}
			default:
			}
			if !running(ten.command) || !running(ten.sleeper) {
				t.Fatal("the stopping word made a follower kill")
			}
			if err := tc.end(ten); err != nil {
				t.Fatal(err)
			}
			if r := returned(t, taking, "the tenure ended"); r != tc.want {
				t.Fatalf("the taker's Prove = %v, %v; want %v, %v", r.ended, r.err, tc.want.ended, tc.want.err)
			}
			if !otherDone {
				if r := returned(t, other, "the tenure ended"); r.ended != otherWant.ended || !errors.Is(r.err, otherWant.err) {
					t.Fatalf("the other follower's Prove = %v, %v; want %v, %v", r.ended, r.err, otherWant.ended, otherWant.err)
				}
			}
			if running(ten.command) || running(ten.sleeper) {
				t.Errorf("after Prove, command running %v, sleeper running %v; want both dead", running(ten.command), running(ten.sleeper))
			}
			select {
			case again := <-told:
				t.Errorf("follower %s was told too; want one only, once", again)
			default:
			}
		})
	}
}

// TestProveTakesStoppingTenureOnceItsTreeIsGone: after the holder's word
// that it is stopping its command, the follower that took the name proves
// the tenure over as soon as the command has exited with its whole tree
// gone, without waiting for the holder to reap it and send its end
// signal. A command that exits while its cgroup still holds a process
// proves nothing: the follower waits on for the holder's end signal.
func TestProveTakesStoppingTenureOnceItsTreeIsGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stop     func(ten *tenure) // what of the command's tree dies, in order
		endAfter bool              // the holder must end its tenure (SIGUSR1) for Prove to return
	}{
		{"the whole tree", func(ten *tenure) {
			syscall.Kill(ten.sleeper, syscall.SIGKILL)
			waitUntil(t, "the sleeper's exit", func() bool { return !running(ten.sleeper) })
			syscall.Kill(ten.command, syscall.SIGKILL)
		}, false},
		{"the command alone", func(ten *tenure) { syscall.Kill(ten.command, syscall.SIGKILL) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ten := startTenure(t, shape{end: true})
			told := make(chan struct{}, 1)
			done := proveEnding(t, t.Context(), record(ten.where), func() { told <- struct{}{} })
			sayStopping(t, ten, told)
			tc.stop(ten)
			waitUntil(t, "the command's exit", func() bool { return !running(ten.command) })
			if tc.endAfter {
				select {
				case r := <-done:
					t.Fatalf("Prove = %v, %v while the command's sleeper still runs; want it to wait", r.ended, r.err)
				case <-time.After(300 * time.Millisecond):
				}
				if err := ten.holder.Process.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
			}
			if r := returned(t, done, "the command's whole tree was gone"); r.err != nil || !r.ended {
				t.Fatalf("Prove = %v, %v; want true, nil once the stopping holder's command and its tree are gone", r.ended, r.err)
			}
			if !running(ten.holder.Process.Pid) {
				t.Error("the holder is dead; want it alive (nothing may signal it)")
			}
			if running(ten.sleeper) {
				t.Error("Prove returned while the sleeper runs")
			}
		})
	}
}

// TestProveLeavesTheStoppingWordToOthers: the follower that took the name
// at the stopping word reads no more of the end signal while the command's
// exit can prove the end (the other followers' copies of the word, one
// byte each, cost CPU the hand-off needs), so a follower that begins to
// watch later still finds its copy of the word and learns at once, while
// the command runs, that another takes the name.
func TestProveLeavesTheStoppingWordToOthers(t *testing.T) {
	ten := startTenure(t, shape{end: true})
	told := make(chan struct{}, 1)
	taker := proveEnding(t, t.Context(), record(ten.where), func() { told <- struct{}{} })
	// The test's own reader of the FIFO, which reads nothing: it counts
	// what the followers leave there.
	fifo, err := unix.Open(ten.where.EndPath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fifo)
	sayStopping(t, ten, told)
	late := proveEnding(t, t.Context(), record(ten.where), func() { t.Error("the late follower was told it may take the name") })
	if r := returned(t, late, "the stopping word, which the late follower should have read"); r.ended || !errors.Is(r.err, elect.ErrOtherTakes) {
		t.Fatalf("the late follower's Prove = %v, %v; want false, ErrOtherTakes", r.ended, r.err)
	}
	if !running(ten.command) {
		t.Fatal("the command ended before the late follower's Prove returned; want it to return at the word")
	}
	time.Sleep(300 * time.Millisecond) // for reads that must not come
	if n, err := unix.IoctlGetInt(fifo, unix.TIOCINQ); err != nil || n != endBytes-2 {
		t.Fatalf("the end signal holds %d bytes (%v) while the command runs; want %d: the stopping word's copies less the taker's and the late follower's", n, err, endBytes-2)
	}
	if err := ten.holder.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if r := returned(t, taker, "the tenure ended"); !r.ended || r.err != nil {
		t.Fatalf("the taker's Prove = %v, %v; want true, nil", r.ended, r.err)
	}
}

// sayStopping makes ten's holder write its stopping word, and waits until
// a follower's Prove says so on told (its ending callback).
func sayStopping(t *testing.T, ten *tenure, told <-chan struct{}) {
	t.Helper()
	if err := ten.holder.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower was not told at the stopping word that it may take the name")
	}
}

// TestEndClaimLastsUntilClosed: one reader of an end signal claims it;
// another cannot until the first closes its end.
func TestEndClaimLastsUntilClosed(t *testing.T) {
	sig, err := NewEndSignal()
	if err != nil {
		t.Fatal(err)
	}
	defer sig.Send()
	self, err := thisProcess()
	if err != nil {
		t.Fatal(err)
	}
	w := sig.Mark(Where{PIDNS: self.PIDNS, Pid: self.Pid, Start: self.Start})
	holder, err := openProcess(self.Pid, self.Start, identity{})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	open := func() *endReader {
		r, err := openEnd(w, holder)
		if err != nil || r == nil {
			t.Fatalf("openEnd = %v, %v", r, err)
		}
		return r
	}
	a, b := open(), open()
	defer b.Close()
	if !a.claim() {
		t.Fatal("the first claim failed; want it to succeed")
	}
	if b.claim() {
		t.Fatal("a second reader claimed the end signal while the first held it")
	}
	a.Close()
	if !b.claim() {
		t.Fatal("the second reader could not claim the end signal after the first closed it")
	}
}

// TestProveIgnoresEndWhileCommandRuns: an end signal while the command
// still runs proves nothing and kills nothing (a dying holder closes its
// files before its pidfd reports the exit; anything else sending it is
// not leaderrun ending a tenure); the holder's death still proves it dead.
func TestProveIgnoresEndWhileCommandRuns(t *testing.T) {
	ten := startTenure(t, shape{end: true})
	done := prove(t, t.Context(), record(ten.where))
	if err := ten.holder.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("Prove = %v, %v after an end signal with the command running; want it to keep watching", r.ended, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if !running(ten.command) || !running(ten.sleeper) {
		t.Fatalf("command running %v, sleeper running %v: an end signal made Prove kill", running(ten.command), running(ten.sleeper))
	}
	if err := ten.holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if r := returned(t, done, "the holder died"); r.err != nil || r.ended {
		t.Fatalf("Prove = %v, %v; want false, nil once the holder died", r.ended, r.err)
	}
	if running(ten.command) || running(ten.sleeper) {
		t.Errorf("after Prove, command running = %v, sleeper running = %v; want both dead", running(ten.command), running(ten.sleeper))
	}
}

// TestProveChecksEndSignalIdentity: a Where whose end signal names
// another descriptor of the holder, or another pipe inode, is watched for
// the holder's death only.
func TestProveChecksEndSignalIdentity(t *testing.T) {
	ten := startTenure(t, shape{end: true})
	w := ten.where
	w.EndIno++
	done := prove(t, t.Context(), record(w))
	if err := ten.holder.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("Prove = %v, %v on another pipe's end; want it to keep watching", r.ended, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	ten.holder.Process.Kill()
	if r := <-done; r.err != nil || r.ended {
		t.Fatalf("Prove = %v, %v; want false, nil once the holder died", r.ended, r.err)
	}
}

// TestCgroupRemovedUnderReaderIsGone: two followers clear one dead leader's
// cgroup at once; one removes it while the other reads its cgroup.events,
// which fails with ENODEV, not ENOENT. That is a removed, empty cgroup,
// not a tree the follower cannot see (it fell back to the lease's expiry).
func TestCgroupRemovedUnderReaderIsGone(t *testing.T) {
	dir, err := os.MkdirTemp(cgroupsForTest(t), "leaderrun-test-")
	if err != nil {
		t.Fatal(err)
	}
	events, err := os.Open(dir + "/cgroup.events")
	if err != nil {
		os.Remove(dir)
		t.Fatal(err)
	}
	defer events.Close()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	_, err = events.Read(make([]byte, 64))
	if err == nil || !gone(err) {
		t.Fatalf("read of a removed cgroup's cgroup.events = %v; want an error that gone recognizes", err)
	}
}
