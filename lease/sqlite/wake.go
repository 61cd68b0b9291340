package sqlite

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A change of hands (acquire, release, step-down request) wakes the
// processes waiting on this database at once, so that a release hands over
// in milliseconds while renewals, which wake nobody, cost waiters nothing:
// no polling. Each Store with a Wait running keeps a FIFO of its own in
// the wake directory beside the database, path+"-wake.d", open for
// reading; wake writes a byte to every FIFO there. Changes made behind the
// store's back (an operator's DELETE) wake nobody; waiters learn of them at
// the lease's expiry. Where no FIFO can be made there, waiters poll PRAGMA
// data_version instead (see watcher), which sees every commit.
//
// Not inotify on a wake file, as before: closing an inotify descriptor
// that holds a watch waits for a kernel grace period (SRCU), 8 to 15 ms
// p50 on this 250 Hz kernel, and every leaderrun paid it on its way out
// (bench, "As an init"). A FIFO closes at once.

// wakeDirSuffix names the wake directory after the database, as SQLite
// names its -wal and -shm files.
const wakeDirSuffix = "-wake.d"

// wakeSuffix is the wake file that leaderruns before the wake directory
// watched with inotify: wake still writes it, so that those still running
// on this host (an upgrade replaces the binary under them) wake at once
// when a newer one hands over.
const wakeSuffix = "-wake"

// fifoTempAge is how old a FIFO under a temporary name must be before
// another process removes it: its maker renames it within microseconds of
// making it, unless it died in between.
const fifoTempAge = time.Minute

// wake tells every process waiting on this database that a name may have
// changed hands. It follows no symbolic link, never blocks, and writes
// only to FIFOs (a file planted in the directory, even a hard link to the
// database, is opened without truncation and closed unwritten), so that
// nothing planted there can hang leaderrun or make it clobber a file. A
// FIFO that nobody reads any more (its waiter died) is removed. It is best
// effort: a waiter that misses it still wakes at the lease's expiry. It
// never opens the database file itself.
func (s *Store) wake() {
	if fd, err := unix.Open(s.path+wakeSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600); err == nil {
		unix.Close(fd)
	}
	dir, err := openWakeDir(s.path+wakeDirSuffix, false)
	if err != nil {
		return // nobody waits, or nobody can
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	dfd := int(dir.Fd())
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue // not made yet
		}
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENXIO) { // a FIFO without a reader: its waiter is gone
			unix.Unlinkat(dfd, name, 0)
			continue
		}
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO {
			unix.Write(fd, []byte{1}) // EAGAIN: a wake-up is already pending
		}
		unix.Close(fd)
	}
}

// openWakeDir opens the wake directory, creating it (owner-only) first when
// create is set; it refuses a symbolic link.
func openWakeDir(path string, create bool) (*os.File, error) {
	if create {
		if err := unix.Mkdir(path, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// wakeWatch is a waiting Store's FIFO in the wake directory.
type wakeWatch struct {
	f      *os.File // open for reading and writing, non-blocking, so Close ends a Read
	dir    *os.File
	name   string
	closed sync.Once
}

// watchWake makes this Store's FIFO in the wake directory at dirPath, with
// permission bits mode (the database file's read and write bits, so that
// the users who share the database can wake each other). The FIFO is open
// before it appears under its final name: a waker that finds a final name
// without a reader may remove it.
func watchWake(dirPath string, mode uint32) (*wakeWatch, error) {
	dir, err := openWakeDir(dirPath, true)
	if err != nil {
		return nil, err
	}
	dfd := int(dir.Fd())
	clearStaleTemps(dir)
	var b [8]byte
	rand.Read(b[:])
	name := strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	temp := "." + name
	if err := unix.Mkfifoat(dfd, temp, 0o600); err != nil {
		dir.Close()
		return nil, err
	}
	fd, err := unix.Openat(dfd, temp, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Fchmod(fd, mode)
		if err == nil {
			err = unix.Renameat(dfd, temp, dfd, name)
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		unix.Unlinkat(dfd, temp, 0)
		dir.Close()
		return nil, err
	}
	return &wakeWatch{f: os.NewFile(uintptr(fd), name), dir: dir, name: name}, nil
}

// clearStaleTemps removes the FIFOs of the wake directory whose makers died
// before giving them their final names.
func clearStaleTemps(dir *os.File) {
	names, _ := dir.Readdirnames(-1)
	dfd := int(dir.Fd())
	for _, name := range names {
		var st unix.Stat_t
		if !strings.HasPrefix(name, ".") || unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) > fifoTempAge {
			unix.Unlinkat(dfd, name, 0)
		}
	}
}

// next blocks until a wake-up came, or until Close.
func (w *wakeWatch) next() error {
	var buf [64]byte // takes every wake-up pending at once
	_, err := w.f.Read(buf[:])
	return err
}

// Close removes the FIFO and closes it; it ends a next in progress. Only
// the first call does anything.
func (w *wakeWatch) Close() error {
	var err error
	w.closed.Do(func() {
		unix.Unlinkat(int(w.dir.Fd()), w.name, 0)
		w.dir.Close()
		err = w.f.Close()
	})
	return err
}
