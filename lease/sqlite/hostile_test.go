package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// The store in directories other users can reach: nothing planted there may
// make leaderrun clobber a file, hang, or elect twice.

// secretFile writes a root-only file whose content must survive the test.
func secretFile(t *testing.T) (path string, content []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "secret")
	content = []byte("do not touch\n")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

// changeHands acquires and releases a name in s: two changes of hands,
// each of which wakes the database's waiters.
func changeHands(t *testing.T, s *Store) {
	t.Helper()
	rec, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
}

func wantUnchanged(t *testing.T, path string, content []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("%s now holds %q (%v), want it untouched: %q", path, got, err, content)
	}
}

func TestSymlinkAtDatabaseIsRefused(t *testing.T) {
	secret, content := secretFile(t)
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx(t), path, Options{})
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of a symbolic link = %v, want a refusal", err)
	}
	wantUnchanged(t, secret, content)
}

func TestSymlinkAtWakeFileIsNotFollowed(t *testing.T) {
	secret, content := secretFile(t)
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	os.Remove(path + wakeSuffix)
	if err := os.Symlink(secret, path+wakeSuffix); err != nil {
		t.Fatal(err)
	}
	changeHands(t, s)
	wantUnchanged(t, secret, content)
}

func TestFIFOAtWakeFileDoesNotHang(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	os.Remove(path + wakeSuffix)
	if err := unix.Mkfifo(path+wakeSuffix, 0o600); err != nil {
		t.Fatal(err)
	}
	changeHandsWithin(t, s, "Acquire and Release hung on a FIFO at the wake file's path")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }() // Close finishes the wake-ups
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wake-up hung on a FIFO at the wake file's path")
	}
}

// changeHandsWithin is changeHands, failing the test with msg unless
// Acquire and Release return within ten seconds.
func changeHandsWithin(t *testing.T, s *Store, msg string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		rec, err := s.Acquire(ctx(t), "n", "a", time.Minute)
		if err == nil {
			err = s.Release(ctx(t), "n", "a", rec.Token)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}

// TestWakeWritesOnlyToFIFOs plants in the wake directory, under names of
// the form leaderrun gives its FIFOs, a file, a hard link to another file,
// a symbolic link to it and a FIFO without a reader: a change of hands
// writes to none of the files, and removes the FIFO, whose waiter is gone,
// while a waiter's own FIFO stays and is woken.
func TestWakeWritesOnlyToFIFOs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leaderrun.db")
	s := openTest(t, path)
	secret := filepath.Join(dir, "secret") // on the wake directory's filesystem, for the hard link
	content := []byte("do not touch\n")
	if err := os.WriteFile(secret, content, 0o600); err != nil {
		t.Fatal(err)
	}
	ww, err := watchWake(path+wakeDirSuffix, s.current().owner)
	if err != nil {
		t.Fatal(err)
	}
	defer ww.Close()
	wakeDir := path + wakeDirSuffix
	planted := filepath.Join(wakeDir, wakeName(1))
	if err := os.WriteFile(planted, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(wakeDir, wakeName(2))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(wakeDir, wakeName(3))); err != nil {
		t.Fatal(err)
	}
	deserted := filepath.Join(wakeDir, wakeName(4))
	if err := unix.Mkfifo(deserted, 0o600); err != nil {
		t.Fatal(err)
	}
	changeHands(t, s)
	if err := s.Close(); err != nil { // waits for the wake-ups
		t.Fatal(err)
	}
	wantUnchanged(t, secret, content)
	wantUnchanged(t, planted, content)
	if _, err := os.Lstat(deserted); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a FIFO nobody reads is still in the wake directory (%v)", err)
	}
	woken := make(chan error, 1)
	go func() { woken <- ww.next() }()
	select {
	case err := <-woken:
		if err != nil {
			t.Errorf("the waiter's FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the waiter's FIFO was not woken")
	}
}

func TestDirectoryOthersControlIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   os.FileMode
		owner  int
		refuse bool
	}{
		{"private", 0o700, -1, false},
		{"group-writable", 0o770, -1, false},
		{"world-writable", 0o777, -1, true},
		{"sticky world-writable, as /tmp", 0o777 | os.ModeSticky, -1, true},
		{"another user's", 0o700, 65534, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.owner >= 0 {
				if os.Geteuid() != 0 {
					t.Skip("changing a directory's owner needs root")
				}
				if err := os.Chown(dir, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(ctx(t), filepath.Join(dir, "leaderrun.db"), Options{})
			if err == nil {
				s.Close()
			}
			if got := errors.Is(err, lease.ErrRefused); got != tc.refuse {
				t.Errorf("Open in a %s directory = %v, refused %v, want %v", tc.name, err, got, tc.refuse)
			}
			if tc.refuse {
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("a refused Open created %v", entries)
				}
			}
		})
	}
}

func TestForeignTableIsLeftAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TABLE leases (id INTEGER PRIMARY KEY, payload TEXT)`); err != nil {
		t.Fatal(err)
	}
	before := schemaOf(t, db)
	_, err := Open(ctx(t), path, Options{})
	if !errors.Is(err, lease.ErrRefused) {
		t.Errorf("Open of a database whose leases table is not leaderrun's = %v, want a refusal", err)
	}
	if after := schemaOf(t, db); !slices.Equal(after, before) {
		t.Errorf("schema changed from %q to %q", before, after)
	}
}

func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT sql FROM sqlite_master ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s.String)
	}
	return out
}

// TestDeletedDatabaseEndsTenure: the database files are deleted while a
// leader runs and another process makes a new one. The old leader's next
// renewal is lost (its tenure was in the old file), and a follower that
// still had the old file open sees the new file's leader.
func TestDeletedDatabaseEndsTenure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	a, b := openTest(t, path), openTest(t, path)
	rec, err := a.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm", wakeSuffix} {
		os.Remove(path + suffix)
	}
	c := openTest(t, path)
	crec, err := c.Acquire(ctx(t), "n", "c", time.Minute)
	if err != nil {
		t.Fatalf("Acquire in the new database: %v", err)
	}
	if _, err := a.Renew(ctx(t), "n", "a", rec.Token, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Errorf("the old leader's Renew after the file was replaced = %v, want ErrLost", err)
	}
	_, err = b.Acquire(ctx(t), "n", "b", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "c" || held.Record.Token != crec.Token {
		t.Errorf("a follower's Acquire after the file was replaced = %v, want held by c with token %d", err, crec.Token)
	}
}

func TestExistingStoreIsNotCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	_, err := Open(ctx(t), filepath.Join(dir, "leaderrun.db"), Options{Existing: true})
	if !errors.Is(err, lease.ErrNoStore) {
		t.Errorf("Open Existing of a missing file = %v, want ErrNoStore", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open Existing created %s (%v)", dir, err)
	}
	// A database that is not leaderrun's is no store either, and stays
	// unchanged.
	path := filepath.Join(t.TempDir(), "other.db")
	db := rawDB(t, path)
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	before := schemaOf(t, db)
	if _, err := Open(ctx(t), path, Options{Existing: true}); !errors.Is(err, lease.ErrNoStore) {
		t.Errorf("Open Existing of a database without leaderrun's table = %v, want ErrNoStore", err)
	}
	if after := schemaOf(t, db); !slices.Equal(after, before) {
		t.Errorf("schema changed from %q to %q", before, after)
	}
}

func TestTokenAtMaximumIsAClearRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	changeHands(t, s)
	if _, err := rawDB(t, path).Exec(`UPDATE leases SET token = 9223372036854775807 WHERE name = 'n'`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "largest value") {
		t.Errorf("Acquire with the token at its maximum = %v, want a refusal that says why", err)
	}
}

func TestTableDroppedMidRunIsCreatedAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	first, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec(`DROP TABLE leases`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx(t), "n", "a", first.Token, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew after the table was dropped = %v, want ErrLost (the record is gone)", err)
	}
	again, err := s.Acquire(ctx(t), "n", "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the table was dropped: %v", err)
	}
	if again.Token <= first.Token {
		t.Errorf("token after the table was created again = %d, want > %d", again.Token, first.Token)
	}
}

// TestOpenOfCompleteTablesTakesNoWriteLock: a replica that starts while
// another process holds the write lock opens a store whose tables are all
// there without waiting for that lock (it waited up to busyTimeout, then
// failed, when it created the tables in a write transaction every time).
func TestOpenOfCompleteTablesTakesNoWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	openTest(t, path) // creates the tables
	conn, err := rawDB(t, path).Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx(t), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	s, err := Open(ctx(t), path, Options{})
	if err != nil {
		t.Fatalf("Open while another process holds the write lock: %v", err)
	}
	s.Close()
}
