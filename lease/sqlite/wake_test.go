package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The wake directory: who may make it, what is read there, and when.

// wakeName is a FIFO name of the form watchWake gives its FIFOs.
func wakeName(i int) string { return fmt.Sprintf("%d-%016x", i+1, i) }

// mkWakeDir makes the wake directory beside path, if it is not there yet.
func mkWakeDir(t *testing.T, path string) string {
	t.Helper()
	dir := path + wakeDirSuffix
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	return dir
}

// TestWakeReadsBoundedEntries fills the wake directory with three times
// maxWakeEntries FIFOs named as leaderrun names them, none with a reader:
// a wake-up pass removes each one it reads (its waiter is gone), so what is
// left tells how many it read. Two changes of hands read at most twice
// maxWakeEntries.
func TestWakeReadsBoundedEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	dir := mkWakeDir(t, path)
	const planted = 3 * maxWakeEntries
	for i := range planted {
		if err := unix.Mkfifo(filepath.Join(dir, wakeName(i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	changeHands(t, s)
	if err := s.Close(); err != nil { // waits for the wake-ups
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, least := len(entries), planted-2*maxWakeEntries; got < least {
		t.Errorf("two changes of hands left %d of %d entries: they read %d, want at most %d",
			got, planted, planted-got, 2*maxWakeEntries)
	}
}

// TestChangeOfHandsDoesNotWaitForWakeUps: Acquire and Release return
// while the wake-up pass they started is held up.
func TestChangeOfHandsDoesNotWaitForWakeUps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	gate := make(chan struct{})
	s.wakeStarted = func() { <-gate }
	t.Cleanup(func() { close(gate) }) // before the Close that openTest set up
	changeHandsWithin(t, s, "Acquire and Release waited for their wake-up pass")
}

// awaitFIFO waits until the wake directory dir holds a FIFO owned by uid.
func awaitFIFO(t *testing.T, dir string, uid uint32) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			var st unix.Stat_t
			if unix.Lstat(filepath.Join(dir, e.Name()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO && st.Uid == uid {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no FIFO of uid %d in %s (it holds %v)", uid, dir, entries)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReleaseJustBeforeCloseWakes: a wake-up runs after the statement,
// yet a Store closed right after a release (leaderrun on its way out)
// still wakes the waiters.
func TestReleaseJustBeforeCloseWakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	a, err := Open(ctx(t), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := openTest(t, path)
	rec, err := a.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 1)
	go func() { woke <- b.Wait(ctx(t), "n", rec, time.Minute) }()
	awaitFIFO(t, path+wakeDirSuffix, uint32(os.Geteuid()))
	if err := a.Release(ctx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Errorf("Wait = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter was not woken by a release made just before Close (its Wait lasts a minute)")
	}
}

// TestUntrustedWakeDirIsNotUsed: a wake directory that the database's
// owner (or root) does not own, or that users outside the database file's
// group may write, gets no waiter's FIFO and no wake-up: what is in it is
// not read.
func TestUntrustedWakeDirIsNotUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting another user's directory needs root")
	}
	for _, tc := range []struct {
		name     string
		mode     uint32
		uid, gid int
	}{
		{"another user's, open to all (as a group member pre-created it)", 0o777, 65534, 65534},
		{"another user's, private", 0o700, 65534, 65534},
		{"another user's, shared with the database's group", 0o2770, 65534, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leaderrun.db")
			var log bytes.Buffer
			s, err := Open(ctx(t), path, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			dir := path + wakeDirSuffix
			os.RemoveAll(dir)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join(dir, wakeName(1))
			if err := unix.Mkfifo(planted, 0o666); err != nil {
				t.Fatal(err)
			}
			reader, err := unix.Open(planted, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(reader)
			for _, p := range []string{planted, dir} {
				if err := os.Chown(p, tc.uid, tc.gid); err != nil {
					t.Fatal(err)
				}
			}
			if err := unix.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, done := s.current().watch.subscribe()
			defer done()
			changeHands(t, s)
			if err := s.Close(); err != nil { // waits for the wake-ups
				t.Fatal(err)
			}
			if n, err := unix.Read(reader, make([]byte, 8)); n > 0 {
				t.Errorf("a FIFO planted in the wake directory was woken (%d bytes, %v)", n, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the wake directory holds %v, want only what was planted: no waiter's FIFO", entries)
			}
			want := "wake directory " + dir + " not used: "
			if got := strings.Count(log.String(), want); got != 1 {
				t.Errorf("the log says %d times %q, want once:\n%s", got, want, log.String())
			}
		})
	}
}

// TestOwnWakeDirOpenToAllIsNarrowed: a wake directory of the database's
// owner that every user may write is made private (the database is) at
// Open.
func TestOwnWakeDirOpenToAllIsNarrowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	dir := filepath.Dir(path)
	if err := os.Mkdir(path+wakeDirSuffix, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path+wakeDirSuffix, 0o777); err != nil {
		t.Fatal(err)
	}
	openTest(t, filepath.Join(dir, "leaderrun.db"))
	st, err := os.Stat(path + wakeDirSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode(), fs.ModeDir|0o700; got != want {
		t.Errorf("mode of the wake directory = %v, want %v", got, want)
	}
}

// sharedGroup is the group that the group-shared tests share a database
// with: users.
const sharedGroup = 100

// sharedDir makes a directory for a database that sharedGroup shares (mode
// 2770), on a path every user may traverse.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a directory of another group needs root")
	}
	top, err := os.MkdirTemp("", "lrwake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "db")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 0, sharedGroup); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantMode checks path's mode and group.
func wantMode(t *testing.T, path string, mode fs.FileMode, gid uint32) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode(); got != mode {
		t.Errorf("mode of %s = %v, want %v", path, got, mode)
	}
	if got := st.Sys().(*syscall.Stat_t).Gid; got != gid {
		t.Errorf("group of %s = %d, want %d", path, got, gid)
	}
}

// TestWakeDirTakesTheDatabasesGroup: beside a database file its group may
// write, the wake directory leaderrun makes is the group's too (with the
// set-group-ID bit, so that each FIFO in it is the group's), and so are
// the FIFOs; beside a private one, it is private. A database file made
// group-writable later gets a group-shared wake directory at the next
// Open.
func TestWakeDirTakesTheDatabasesGroup(t *testing.T) {
	dir := sharedDir(t)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	shared := filepath.Join(dir, "shared.db")
	if err := os.WriteFile(shared, nil, 0o660); err != nil { // as install -m 660 does
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o660); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, shared)
	wantMode(t, shared+wakeDirSuffix, fs.ModeDir|fs.ModeSetgid|0o770, sharedGroup)
	_, done := s.current().watch.subscribe()
	defer done()
	entries, err := os.ReadDir(shared + wakeDirSuffix)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the wake directory holds %v (%v), want the waiter's FIFO", entries, err)
	}
	wantMode(t, filepath.Join(shared+wakeDirSuffix, entries[0].Name()), fs.ModeNamedPipe|0o660, sharedGroup)

	later := filepath.Join(dir, "later.db")
	openTest(t, later)
	wantMode(t, later+wakeDirSuffix, fs.ModeDir|0o700, sharedGroup)
	if err := os.Chmod(later, 0o660); err != nil {
		t.Fatal(err)
	}
	openTest(t, later)
	wantMode(t, later+wakeDirSuffix, fs.ModeDir|fs.ModeSetgid|0o770, sharedGroup)
}

// TestGroupSharedWakeUpAcrossUsers: root makes a group-shared store
// (directory 2770, database file 0660 of the group, as the administrator
// made them) with one change of hands, and nothing else. A user of the
// group then waits through a FIFO in the wake directory that root made,
// and root's release wakes it (its Wait lasts a minute); then root waits
// there and the user's release wakes root.
func TestGroupSharedWakeUpAcrossUsers(t *testing.T) {
	const user = 65534 // nobody
	dir := sharedDir(t)
	path := filepath.Join(dir, "leaderrun.db")
	if err := os.WriteFile(path, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, path)
	changeHands(t, s)
	wantMode(t, path+wakeDirSuffix, fs.ModeDir|fs.ModeSetgid|0o770, sharedGroup)

	bin := filepath.Dir(dir)
	waiter := startHelperAs(t, "the user's waiter", "wait", path, bin, user, []uint32{sharedGroup})
	waiter.expect("ready")
	rec, err := s.Acquire(ctx(t), "handoff", "root", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiter.send("wait")
	waiter.expect("waiting")
	awaitFIFO(t, path+wakeDirSuffix, user)
	if err := s.Release(ctx(t), "handoff", "root", rec.Token); err != nil {
		t.Fatal(err)
	}
	waiter.expect("woke")
	if st, err := os.Stat(path + wakeDirSuffix); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the wake directory is not root's (%v)", err)
	}

	hand := startHelperAs(t, "the user's hand-over", "hand-over", path, bin, user, []uint32{sharedGroup})
	hand.expect("ready")
	seen, err := s.Get(ctx(t), "handoff")
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 1)
	go func() { woke <- s.Wait(ctx(t), "handoff", seen, time.Minute) }()
	awaitFIFO(t, path+wakeDirSuffix, 0)
	hand.send("go")
	hand.expect("released")
	select {
	case err := <-woke:
		if err != nil {
			t.Errorf("root's Wait = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("root's Wait was not woken by the user's release (it lasts a minute)")
	}
}
