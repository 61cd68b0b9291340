package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite returns SQLITE_BUSY without waiting out the busy timeout in a few
// cases: while another process runs WAL recovery, while the last
// connection of another process checkpoints and removes the WAL on close,
// and while a new database is switched to WAL mode. In WAL mode a
// statement that fails with SQLITE_BUSY has changed nothing (a commit
// needs no lock beyond the write lock the statement already holds), so it
// is safe to run it again.

// openBusyBudget bounds how long Open retries a busy database.
const openBusyBudget = 5 * time.Second

// retryBusy calls fn until it returns something other than a busy error,
// for at most budget (and while ctx lasts), and returns fn's last error.
func retryBusy(ctx context.Context, budget time.Duration, fn func() error) error {
	deadline := time.Now().Add(budget)
	delay := time.Millisecond
	for {
		err := fn()
		if !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED, in any of
// their extended forms.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// lockHolders names the other processes that hold a write lock on the
// database's files (the -shm file carries WAL mode's write lock), from
// /proc/locks: "pid 123 (leaderrun --name relay, stopped)". It returns ""
// when it finds none or cannot tell.
func lockHolders(dbPath string) string {
	inodes := map[uint64]bool{}
	for _, p := range []string{dbPath, dbPath + "-shm"} {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			inodes[st.Ino] = true
		}
	}
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	self := os.Getpid()
	var who []string
	seen := map[int]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		// "1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 120 120"
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "POSIX" || f[3] != "WRITE" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		dev := strings.Split(f[5], ":")
		if err != nil || pid == self || seen[pid] || len(dev) != 3 {
			continue
		}
		if ino, err := strconv.ParseUint(dev[2], 10, 64); err == nil && inodes[ino] {
			seen[pid] = true
			who = append(who, describeProcess(pid))
		}
	}
	return strings.Join(who, ", ")
}

// describeProcess is "pid N (command line, state)".
func describeProcess(pid int) string {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	cmd := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	if len(cmd) > 80 {
		cmd = cmd[:80] + "…"
	}
	state := "running"
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
			switch stat[i+2] {
			case 'T', 't':
				state = "stopped: it holds the lock until it continues"
			case 'D':
				state = "in uninterruptible sleep"
			}
		}
	}
	return fmt.Sprintf("pid %d (%s, %s)", pid, cmd, state)
}

// busyError explains a busy database: who holds its write lock.
func (s *Store) busyError(err error) error {
	if !isBusy(err) {
		return err
	}
	if who := lockHolders(s.path); who != "" {
		return fmt.Errorf("%w (the write lock is held by %s)", err, who)
	}
	return err
}
