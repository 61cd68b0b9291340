//go:build linux

package samehost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// follow plays a follower (LOCAL_TEST_ROLE=follower): it proves dead the
// holder that the Where text in LOCAL_TEST_WHERE names, writes the file
// LOCAL_TEST_READY once it watches, and exits 0 once the holder's death is
// proved, 1 otherwise. Its log goes to stderr.
func follow() int {
	log := slog.New(readyOn{prefix: "watching the leader", file: os.Getenv("LOCAL_TEST_READY"),
		Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})})
	rec := lease.Record{Name: "relay", Holder: "a", Token: 7, Remaining: time.Minute, Where: os.Getenv("LOCAL_TEST_WHERE")}
	ended, err := (&Prover{Logger: log}).Prove(context.Background(), rec, func() {})
	if err != nil || ended {
		fmt.Fprintf(os.Stderr, "Prove = %v, %v\n", ended, err)
		return 1
	}
	return 0
}

// readyOn is a slog handler that writes file once a message starts with
// prefix.
type readyOn struct {
	slog.Handler
	prefix, file string
}

func (h readyOn) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		os.WriteFile(h.file, nil, 0o644)
	}
	return h.Handler.Handle(ctx, r)
}

func (h readyOn) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

// copyProgram copies the test binary to dir/name, so that processes run
// from it have that command name.
func copyProgram(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// openPty opens a pseudo-terminal pair, neither end as this process's
// controlling terminal, and returns the slave's path.
func openPty(t *testing.T) (master, slave *os.File, path string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	rc, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	})
	if ierr != nil {
		t.Fatal(ierr)
	}
	path = fmt.Sprintf("/dev/pts/%d", n)
	if slave, err = os.OpenFile(path, os.O_RDWR|syscall.O_NOCTTY, 0); err != nil {
		t.Fatal(err)
	}
	return master, slave, path
}

// ttyNr returns field 7 of /proc/PID/stat: the process's controlling
// terminal, 0 for none.
func ttyNr(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:])) // from field 3, state
	n, err := strconv.Atoi(f[4])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProveNeverTakesForgedTerminal: a record forged in the store points
// a follower's end signal at a pseudo-terminal that a process named
// leaderrun holds as its descriptor 3 (the holder as this package knows
// one: its command is its child, in a cgroup named after it): by the
// descriptor (the v2 form, through /proc/PID/fd), by the terminal's path,
// and by the holder's descriptor's path in /proc. A follower without a
// controlling terminal (a service) must not get that terminal: its tty_nr
// stays 0, the terminal has no session, and a ^C typed into it (read back
// from its echo) does not reach the follower, which dies only by the
// SIGTERM sent after it.
func TestProveNeverTakesForgedTerminal(t *testing.T) {
	dir := t.TempDir()
	prog := copyProgram(t, dir, "leaderrun")
	master, slave, pts := openPty(t)
	fi, err := slave.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	ten := startTenure(t, shape{prog: prog, extra: []*os.File{slave}})
	slave.Close()
	rest := strings.TrimPrefix(ten.where.String(), version+" ")
	for _, tc := range []struct{ name, where string }{
		{"the holder's descriptor (v2)", fmt.Sprintf("v2 %s end_fd=3 end_ino=%d", rest, ino)},
		{"the terminal's path", fmt.Sprintf("v3 %s end_ino=%d end_path=%s", rest, ino, pts)},
		{"the holder's descriptor through /proc", fmt.Sprintf("v3 %s end_ino=%d end_path=/proc/%d/fd/3", rest, ino, ten.holder.Process.Pid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := exec.Command(prog)
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
			f := startFollower(t, c, tc.where)
			waitUntil(t, "the follower to watch the holder", func() bool {
				if _, err := os.Stat(f.ready); err == nil {
					return true
				}
				select {
				case <-f.exited:
					t.Fatal("the follower ended before it watched the holder")
				default:
				}
				return false
			})
			if n := ttyNr(t, f.Process.Pid); n != 0 {
				t.Errorf("the follower's tty_nr = %#x, want 0: it took the forged terminal as its own", n)
			}
			if sid := session(t, master); sid != 0 {
				t.Errorf("the terminal is the controlling terminal of session %d (the follower is %d), want none", sid, f.Process.Pid)
			}
			if _, err := master.Write([]byte{0x03}); err != nil { // ^C
				t.Fatal(err)
			}
			awaitEcho(t, master, "^C")
			if err := f.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-f.exited:
			case <-time.After(10 * time.Second):
				t.Fatal("the follower did not end at SIGTERM")
			}
			err := f.err
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
				t.Errorf("the follower ended with %v after a ^C on the terminal; want it killed by the SIGTERM sent after", err)
			}
		})
	}
}

// follower is a follower process (LOCAL_TEST_ROLE=follower, follow).
type follower struct {
	*exec.Cmd
	exited chan struct{} // closed once it exited
	err    error         // its Wait's, once exited is closed
	ready  string        // the file it writes once it watches the holder
	log    bytes.Buffer
}

// startFollower starts c, the test binary or a program that runs it, as a
// follower that proves dead the holder the Where text where names. It is
// killed, and its log logged, when the test ends.
func startFollower(t *testing.T, c *exec.Cmd, where string) *follower {
	t.Helper()
	f := &follower{Cmd: c, exited: make(chan struct{}), ready: filepath.Join(t.TempDir(), "ready")}
	c.Env = append(os.Environ(), "LOCAL_TEST_ROLE=follower", "LOCAL_TEST_WHERE="+where, "LOCAL_TEST_READY="+f.ready)
	c.Stderr = &f.log
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.err = c.Wait(); close(f.exited) }()
	t.Cleanup(func() {
		c.Process.Kill()
		<-f.exited
		t.Logf("the follower's log:\n%s", f.log.String())
	})
	return f
}

// session returns the session whose controlling terminal the pty is, 0
// for none.
func session(t *testing.T, master *os.File) int {
	t.Helper()
	rc, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var sid int
	var ierr error
	rc.Control(func(fd uintptr) { sid, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGSID) })
	if errors.Is(ierr, unix.ENOTTY) {
		return 0
	}
	if ierr != nil {
		t.Fatal(ierr)
	}
	return sid
}

// awaitEcho reads the terminal's output until it holds want: the line
// discipline has processed what was typed, signal included.
func awaitEcho(t *testing.T, master *os.File, want string) {
	t.Helper()
	if err := master.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer master.SetReadDeadline(time.Time{})
	var got []byte
	buf := make([]byte, 256)
	for !bytes.Contains(got, []byte(want)) {
		n, err := master.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("read the terminal's echo: %v (got %q, want %q)", err, got, want)
		}
	}
}

// heldHere reports whether this process has a descriptor open on the
// file p names (by device and inode, through /proc/self/fd).
func heldHere(t *testing.T, p string) bool {
	t.Helper()
	var want unix.Stat_t
	if err := unix.Stat(p, &want); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var st unix.Stat_t
		if unix.Stat("/proc/self/fd/"+e.Name(), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			return true
		}
	}
	return false
}

// readFIFO plays a daemon with a FIFO of its own (LOCAL_TEST_ROLE=
// fifo-reader): it opens LOCAL_TEST_FIFO for reading, writes the file
// LOCAL_TEST_READY, and at SIGUSR1 reads what one read without waiting
// gives into the file LOCAL_TEST_OUT and exits.
func readFIFO() int {
	fd, err := unix.Open(os.Getenv("LOCAL_TEST_FIFO"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 3
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	os.WriteFile(os.Getenv("LOCAL_TEST_READY"), nil, 0o644)
	<-sigs
	b := make([]byte, 16)
	n, _ := unix.Read(fd, b)
	out := os.Getenv("LOCAL_TEST_OUT")
	os.WriteFile(out+".tmp", b[:max(n, 0)], 0o644)
	os.Rename(out+".tmp", out)
	return 0
}

// TestProveOpensOnlyTheHoldersFIFO: a follower opens the end signal that
// a record names only if the path is the holder's own end signal file:
// in the directory of the holder's user's end signals (a directory of
// that user's that no other may enter), named after the holder's PID
// namespace, pid and start time, a FIFO of the holder's user with the
// recorded inode that no other user may write, reached without a
// symbolic link. A record forged to name anything else is watched for the
// holder's death only: this process opens none of those files (judged by
// its /proc/self/fd), and a daemon's FIFO keeps the byte a writer meant
// for the daemon.
func TestProveOpensOnlyTheHoldersFIFO(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a FIFO of another user takes root")
	}
	ten := startTenure(t, shape{end: true})
	other := startTenure(t, shape{end: true})
	holderDir := filepath.Dir(ten.where.EndPath)
	holderName := func(seq int) string {
		return fmt.Sprintf("end-%d-%d-%d-%d", ten.where.PIDNS, ten.where.Pid, ten.where.Start, seq)
	}
	dir := t.TempDir() // root's alone, as a daemon's own directory may be
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	plant := func(t *testing.T, p string, mode uint32, uid int) (string, uint64) {
		t.Helper()
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		if err := os.Chmod(p, os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return p, st.Ino
	}
	link := func(t *testing.T, target, p string) {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	// A daemon reads a FIFO of root's, into which a writer has put a
	// byte for it.
	daemonFIFO, daemonIno := plant(t, filepath.Join(dir, "daemon"), 0o600, 0)
	daemonOut := filepath.Join(dir, "daemon-read")
	daemon := func(t *testing.T) {
		t.Helper()
		ready := filepath.Join(dir, "daemon-ready")
		d := exec.Command(os.Args[0])
		d.Env = append(os.Environ(), "LOCAL_TEST_ROLE=fifo-reader", "LOCAL_TEST_FIFO="+daemonFIFO,
			"LOCAL_TEST_READY="+ready, "LOCAL_TEST_OUT="+daemonOut)
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { d.Wait(); close(exited) }()
		t.Cleanup(func() { d.Process.Kill(); <-exited })
		waitUntil(t, "the daemon to open its FIFO", func() bool { _, err := os.Stat(ready); return err == nil })
		w, err := os.OpenFile(daemonFIFO, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		w.Close()
		t.Cleanup(func() {
			// After the follower: the daemon reads its byte.
			if err := d.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			var got []byte
			waitUntil(t, "the daemon's read", func() bool {
				var err error
				got, err = os.ReadFile(daemonOut)
				return err == nil
			})
			if string(got) != "x" {
				t.Errorf("the daemon read %q from its FIFO, want the byte written for it, %q", got, "x")
			}
		})
	}
	for _, tc := range []struct {
		name   string
		forge  func(t *testing.T) (path string, ino uint64, fifo string)
		opened bool
	}{
		{"the holder's own", func(t *testing.T) (string, uint64, string) {
			return ten.where.EndPath, ten.where.EndIno, ten.where.EndPath
		}, true},
		{"another user's FIFO named as the holder's, in its directory", func(t *testing.T) (string, uint64, string) {
			p, ino := plant(t, filepath.Join(holderDir, holderName(1001)), 0o600, 65534)
			return p, ino, p
		}, false},
		{"a FIFO that others may write, named as the holder's, in its directory", func(t *testing.T) (string, uint64, string) {
			p, ino := plant(t, filepath.Join(holderDir, holderName(1002)), 0o622, 0)
			return p, ino, p
		}, false},
		{"a root FIFO outside the directory, which a daemon reads", func(t *testing.T) (string, uint64, string) {
			daemon(t)
			return daemonFIFO, daemonIno, daemonFIFO
		}, false},
		{"another holder's end signal", func(t *testing.T) (string, uint64, string) {
			return other.where.EndPath, other.where.EndIno, other.where.EndPath
		}, false},
		{"a link to the holder's FIFO", func(t *testing.T) (string, uint64, string) {
			p := filepath.Join(dir, "link")
			link(t, ten.where.EndPath, p)
			return p, ten.where.EndIno, ten.where.EndPath
		}, false},
		{"the holder's FIFO through a linked directory", func(t *testing.T) (string, uint64, string) {
			d := filepath.Join(dir, "leaderrun")
			link(t, holderDir, d)
			return filepath.Join(d, filepath.Base(ten.where.EndPath)), ten.where.EndIno, ten.where.EndPath
		}, false},
		{"a link named as the holder's FIFO, in its directory, to a root FIFO", func(t *testing.T) (string, uint64, string) {
			p := filepath.Join(holderDir, holderName(1003))
			link(t, daemonFIFO, p)
			return p, daemonIno, daemonFIFO
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ten.where
			path, ino, fifo := tc.forge(t)
			w.EndPath, w.EndIno = path, ino
			ctx, cancel := context.WithCancel(t.Context())
			done := prove(t, ctx, record(w)) // opened (or not) before it watches
			if got := heldHere(t, fifo); got != tc.opened {
				t.Errorf("the follower has %s open: %v, want %v", fifo, got, tc.opened)
			}
			cancel()
			returned(t, done, "its context ended")
		})
	}
}

// TestEndSignalWatchedSinceTheStoppingWord: a follower that had the end
// signal open when the holder wrote its stopping word may take the name and
// close its end before the end word (it proves the tenure over at the
// command's end): the holder still counts the signal watched, and looks for
// the follower's takeover before it releases. Nobody reading at the word,
// nor since, is not watched.
func TestEndSignalWatchedSinceTheStoppingWord(t *testing.T) {
	for _, reader := range []bool{true, false} {
		t.Run(fmt.Sprint("reader ", reader), func(t *testing.T) {
			sig, err := NewEndSignal()
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(sig.Send)
			if reader {
				fd, err := unix.Open(sig.Mark(Where{}).EndPath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				sig.Stopping()
				unix.Close(fd)
			} else {
				sig.Stopping()
			}
			if got := sig.Watched(); got != reader {
				t.Errorf("Watched() = %v after the stopping word with a reader then: %v; want %v", got, reader, reader)
			}
		})
	}
}
