package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"golang.org/x/sys/unix"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func openTest(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(ctx(t), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawDB opens the database behind the store's back, as an operator would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=1000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Harness { return harness(t, nil) })
}

// TestConformanceWithoutWakeFIFO runs the suite with waiters polling
// PRAGMA data_version, as where no FIFO can be made in the wake directory.
func TestConformanceWithoutWakeFIFO(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		missing := filepath.Join(t.TempDir(), "missing", "x-wake.d")
		// A wake directory in a directory that does not exist cannot be
		// made: the watcher falls back to polling.
		return harness(t, func(s *Store) { s.current().watch.wakeDir = missing })
	})
}

// harness is a conformance harness over a fresh file; adjust, when set, is
// applied to every Store it opens.
func harness(t *testing.T, adjust func(*Store)) leasetest.Harness {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	return leasetest.Harness{
		Open: func(t *testing.T) lease.Store {
			s, err := Open(ctx(t), path, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if adjust != nil {
				adjust(s)
			}
			return s
		},
		Delete: func(t *testing.T, name string) {
			if _, err := rawDB(t, path).Exec(`DELETE FROM leases WHERE name = ?`, name); err != nil {
				t.Fatalf("delete %q: %v", name, err)
			}
		},
	}
}

func TestPragmas(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "leaderrun.db"))
	for _, p := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "1"},
		{"busy_timeout", "1000"},
	} {
		var got string
		if err := s.db().QueryRowContext(ctx(t), "PRAGMA "+p.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", p.pragma, err)
		}
		if got != p.want {
			t.Errorf("PRAGMA %s = %q, want %q", p.pragma, got, p.want)
		}
	}
	if busyTimeout >= 2*time.Second {
		t.Errorf("busy timeout %v is not below the default renew interval", busyTimeout)
	}
}

func TestFileModes(t *testing.T) {
	old := unix.Umask(0)
	defer unix.Umask(old)
	dir := filepath.Join(t.TempDir(), "state", "leaderrun")
	path := filepath.Join(dir, "leaderrun.db")
	s := openTest(t, path)
	if _, err := s.Acquire(ctx(t), "n", "a", time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	for _, c := range []struct {
		path string
		want fs.FileMode
	}{
		{filepath.Dir(dir), fs.ModeDir | 0o700},
		{dir, fs.ModeDir | 0o700},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
	} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Error(err)
			continue
		}
		if got := st.Mode(); got != c.want {
			t.Errorf("mode of %s = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestExistingDirectoryKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	openTest(t, filepath.Join(dir, "leaderrun.db"))
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode().Perm(), fs.FileMode(0o755); got != want {
		t.Errorf("mode of the existing directory = %v, want %v (untouched)", got, want)
	}
}

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn   string
		path  string
		opts  Options
		error string // a substring of the error; "" for none
	}{
		{dsn: "sqlite:/abs/file.db", path: "/abs/file.db"},
		{dsn: "sqlite:///abs/file.db", path: "/abs/file.db"},
		{dsn: "sqlite:rel/file.db", path: "rel/file.db"},
		{dsn: "file:/abs/file.db", path: "/abs/file.db"},
		{dsn: "file:///abs/file.db", path: "/abs/file.db"},
		{dsn: "file:rel.db", path: "rel.db"},
		{dsn: "sqlite:/a%20b/c%3Fd.db", path: "/a b/c?d.db"},
		{dsn: "sqlite:rel%23x.db", path: "rel#x.db"},
		{dsn: "sqlite:/x/f.db?unsafe_allow_network_fs=1", path: "/x/f.db", opts: Options{UnsafeAllowNetworkFS: true}},
		{dsn: "file:x.db?unsafe_allow_network_fs=false", path: "x.db"},
		{dsn: "sqlite:/x/f.db?journal=off", error: `unknown option "journal"`},
		{dsn: "sqlite:/x/f.db?unsafe_allow_network_fs=maybe", error: "not a boolean"},
		{dsn: "sqlite:/x/f.db?unsafe_allow_network_fs=1&unsafe_allow_network_fs=1", error: "given 2 times"},
		{dsn: "sqlite:", error: "empty path"},
		{dsn: "sqlite:?unsafe_allow_network_fs=1", error: "empty path"},
		{dsn: "sqlite://", error: "empty path"},
		{dsn: "sqlite://host/x.db", error: "host"},
		{dsn: "sqlite:/x.db#frag", error: "fragment"},
		{dsn: "sqlite:/x%zz.db", error: "invalid URL escape"},
	} {
		path, opts, err := parseDSN(c.dsn)
		if c.error != "" {
			if err == nil || !strings.Contains(err.Error(), c.error) || !errors.Is(err, lease.ErrRefused) {
				t.Errorf("parseDSN(%q) = %v, want an error containing %q wrapping ErrRefused", c.dsn, err, c.error)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseDSN(%q): %v", c.dsn, err)
			continue
		}
		if path != c.path || opts != c.opts {
			t.Errorf("parseDSN(%q) = %q, %+v; want %q, %+v", c.dsn, path, opts, c.path, c.opts)
		}
	}
}

func TestOpenByDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct{ dsn, path string }{
		{"sqlite:" + dir + "/a.db", dir + "/a.db"},
		{"sqlite://" + dir + "/b.db", dir + "/b.db"},
		{"sqlite:rel/c.db", dir + "/rel/c.db"},
		{"file:d.db", dir + "/d.db"},
	} {
		s, err := lease.Open(ctx(t), c.dsn)
		if err != nil {
			t.Errorf("lease.Open(%q): %v", c.dsn, err)
			continue
		}
		if got, want := s.Describe(), "sqlite:"+c.path; got != want {
			t.Errorf("lease.Open(%q).Describe() = %q, want %q", c.dsn, got, want)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestBadInputCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	_, err := lease.Open(ctx(t), "sqlite:"+dir+"/sub/x.db?bogus=1")
	if err == nil || !strings.Contains(err.Error(), `"bogus"`) || !errors.Is(err, lease.ErrRefused) {
		t.Errorf("lease.Open with an unknown option = %v, want a refusal naming the option", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused DSN created %v", entries)
	}
	if _, err := Open(ctx(t), "", Options{}); !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of an empty path = %v, want ErrRefused", err)
	}
}

func TestUnusablePathIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(file, "leaderrun.db"),
		filepath.Join(file, "sub", "leaderrun.db"),
		dir, // a directory, not a file
		notDB,
	} {
		s, err := Open(ctx(t), path, Options{})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want a refusal", path)
			continue
		}
		if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%q) = %v, want a refusal naming the path", path, err)
		}
	}
}

func TestClassifyFS(t *testing.T) {
	for _, c := range []struct {
		magic  uint32
		fstype string
		want   string
	}{
		{0xef53, "ext4", ""},
		{0x58465342, "xfs", ""},
		{0x01021994, "tmpfs", ""},
		{0x794c7630, "overlay", ""},
		{0x9123683e, "btrfs", ""},
		{0x6969, "nfs4", "nfs"},
		{0x517b, "smbfs", "smb"},
		{0xff534d42, "cifs", "cifs"},
		{0xfe534d42, "smb3", "smb2"},
		{0x01021997, "9p", "9p"},
		{0x00c36400, "ceph", "ceph"},
		{0x5346414f, "afs", "afs"},
		{0x6b414653, "afs", "afs"},
		{0x0bd00bd0, "lustre", "lustre"},
		{0x01161970, "gfs2", "gfs2"},
		{0x7461636f, "ocfs2", "ocfs2"},
		{0x65735546, "fuse.sshfs", "fuse.sshfs"},
		{0x65735546, "fuse.glusterfs", "fuse.glusterfs"},
		{0x65735546, "fuse.gocryptfs", ""},
		{0x65735546, "fuse", ""},
		{0x65735546, "", ""},
	} {
		if got := classifyFS(c.magic, c.fstype); got != c.want {
			t.Errorf("classifyFS(%#x, %q) = %q, want %q", c.magic, c.fstype, got, c.want)
		}
	}
}

func TestLocalFSIsAccepted(t *testing.T) {
	name, err := networkFSOf(t.TempDir())
	if err != nil {
		t.Fatalf("statfs of a temporary directory: %v", err)
	}
	if name != "" {
		t.Errorf("temporary directory is on network filesystem %q, want local", name)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got, want := unescapeMount(`/mnt/with\040space\134x`), `/mnt/with space\x`; got != want {
		t.Errorf("unescapeMount = %q, want %q", got, want)
	}
}

func TestOtherBootCountsAsExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	a, b := openTest(t, path), openTest(t, path)
	first, err := a.Acquire(ctx(t), "n", "a", time.Hour)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE leases SET boot_id = 'another-boot' WHERE name = 'n'`); err != nil {
		t.Fatal(err)
	}
	rec, err := b.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got, want := rec.State(), "expired"; got != want {
		t.Errorf("state of a record from another boot = %q, want %q", got, want)
	}
	second, err := b.Acquire(ctx(t), "n", "b", time.Hour)
	if err != nil {
		t.Fatalf("Acquire of a record from another boot: %v", err)
	}
	if second.Token <= first.Token {
		t.Errorf("token = %d, want > %d", second.Token, first.Token)
	}
	if _, err := a.Renew(ctx(t), "n", "a", first.Token, time.Hour); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew by the holder from before = %v, want ErrLost", err)
	}
}

func TestWallClockFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	wall, mono := openTest(t, path), openTest(t, path)
	wall.clock = hostClock{bootID: wallBootID}
	rec, err := wall.Acquire(ctx(t), "n", "w", 200*time.Millisecond)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if d := time.Until(rec.Expires); d <= 0 || d > 200*time.Millisecond {
		t.Errorf("expires in %v, want within 200ms", d)
	}
	if _, err := wall.Acquire(ctx(t), "n", "w2", time.Minute); !errors.As(err, new(*lease.HeldError)) {
		t.Errorf("second Acquire = %v, want *lease.HeldError", err)
	}
	if _, err := wall.Renew(ctx(t), "n", "w", rec.Token, 200*time.Millisecond); err != nil {
		t.Errorf("Renew: %v", err)
	}
	got, err := mono.Get(ctx(t), "n")
	if err != nil {
		t.Fatal(err)
	}
	if got.Held() {
		t.Errorf("a monotonic-clock store sees a wall-clock record as %s, want expired", got.State())
	}
}

func TestCancelledContextAborts(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "leaderrun.db"))
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	if _, err := s.Acquire(c, "n", "a", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx(t), "n"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get after a cancelled Acquire = %v, want ErrNotFound", err)
	}
}

func TestRenewalsDoNotWakeWaiter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	a, b := openTest(t, path), openTest(t, path)
	rec, err := a.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 400 * time.Millisecond
	woke := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		b.Wait(ctx(t), "n", rec, timeout)
		woke <- time.Since(start)
	}()
	renewals := time.NewTicker(2 * pollInterval)
	defer renewals.Stop()
	for {
		select {
		case d := <-woke:
			if d < timeout {
				t.Errorf("Wait returned after %v of renewals, want its timeout %v", d, timeout)
			}
			return
		case <-renewals.C:
			if _, err := a.Renew(ctx(t), "n", "a", rec.Token, time.Minute); err != nil {
				t.Fatalf("Renew: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return")
		}
	}
}

func TestDefaultPath(t *testing.T) {
	got := DefaultPath()
	if !filepath.IsAbs(got) || filepath.Base(got) != "leaderrun.db" {
		t.Errorf("DefaultPath() = %q, want an absolute path to leaderrun.db", got)
	}
	if os.Geteuid() == 0 {
		if want := "/var/lib/leaderrun/leaderrun.db"; got != want {
			t.Errorf("DefaultPath() for root = %q, want %q", got, want)
		}
	}
}

func TestNetworkFSIsRefused(t *testing.T) {
	defer func(orig func(string) (string, error)) { detectNetworkFS = orig }(detectNetworkFS)
	detectNetworkFS = func(string) (string, error) { return "nfs", nil }
	dir := t.TempDir()
	path := filepath.Join(dir, "x", "leaderrun.db")
	_, err := Open(ctx(t), path, Options{})
	want := "sqlite store " + path + ": directory is on a network filesystem (nfs); locks are unreliable there (unsafe_allow_network_fs=1 overrides)"
	if err == nil || err.Error() != want {
		t.Errorf("Open on nfs = %v, want %q", err, want)
	}
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open on nfs = %v, want it to wrap ErrRefused", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused Open created %v", entries)
	}
	s, err := lease.Open(ctx(t), "sqlite:"+path+"?unsafe_allow_network_fs=1")
	if err != nil {
		t.Fatalf("Open on nfs with unsafe_allow_network_fs=1: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestWaitingHoldsNoInotifyWatch: a Store with waiters must not watch with
// inotify, whose descriptor takes the kernel a grace period to close (8 to
// 15 ms p50 here), paid at every leaderrun's exit; it keeps a FIFO in the
// wake directory instead.
func TestWaitingHoldsNoInotifyWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	_, done := s.current().watch.subscribe()
	defer done()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == "anon_inode:inotify" {
			t.Errorf("descriptor %s is an inotify instance", fd.Name())
		}
	}
	fifos, _ := os.ReadDir(path + wakeDirSuffix)
	if len(fifos) != 1 || fifos[0].Type()&os.ModeNamedPipe == 0 {
		t.Errorf("the wake directory holds %v, want the waiting Store's FIFO", fifos)
	}
}
