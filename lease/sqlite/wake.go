package sqlite

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A change of hands (acquire, release, step-down request) also writes the
// wake file beside the database, path+"-wake". Waiting processes watch it
// with inotify, so a release wakes them at once, while renewals, which do
// not touch it, cost them nothing: no polling. Changes made behind the
// store's back (an operator's DELETE) do not write it; waiters learn of
// them at the lease's expiry. Where inotify is not available, waiters poll
// PRAGMA data_version instead (see watcher), which sees every commit.

// wakeSuffix names the wake file after the database, as SQLite names its
// -wal and -shm files.
const wakeSuffix = "-wake"

// wake tells every process waiting on this database that a name may have
// changed hands, by opening the wake file for writing and closing it, which
// inotify reports as IN_CLOSE_WRITE. It writes nothing and never truncates,
// follows no symbolic link and never blocks (a FIFO planted there without a
// reader fails at once), so that a planted file can neither hang leaderrun
// nor make it clobber another file. It is best effort: a waiter that
// misses it still wakes at the lease's expiry. It never opens the database
// file itself.
func (s *Store) wake() {
	fd, err := unix.Open(s.path+wakeSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
	}
}

// wakeWatch reports writes of one wake file through inotify.
type wakeWatch struct {
	f    *os.File // the inotify descriptor, non-blocking, so Close ends a Read
	name []byte   // the wake file's base name
}

// watchWake starts watching the directory of the wake file for it.
func watchWake(wakePath string) (*wakeWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	const events = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_CREATE
	if _, err := unix.InotifyAddWatch(fd, filepath.Dir(wakePath), events); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &wakeWatch{f: os.NewFile(uintptr(fd), "inotify"), name: []byte(filepath.Base(wakePath))}, nil
}

// next blocks until the wake file was written (or the kernel's event queue
// overflowed, which may hide such a write), or until Close.
func (w *wakeWatch) next() error {
	buf := make([]byte, 4096)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return err
		}
		if w.matches(buf[:n]) {
			return nil
		}
	}
}

// matches reports whether a batch of inotify events concerns the wake file.
func (w *wakeWatch) matches(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return true // a torn batch: treat as a change
		}
		name := bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00")
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 || bytes.Equal(name, w.name) {
			return true
		}
		b = b[end:]
	}
	return false
}

func (w *wakeWatch) Close() error {
	if err := w.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
