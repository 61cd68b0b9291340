package sqlite

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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
// The wake directory is the database owner's: only the user who owns the
// database file makes it, with the file's group permissions, and a
// directory that another user made, or that users outside the file's
// group may write, is not used at all (checkWakeDir). Every user of the
// database decides alike, so a waiter never keeps a FIFO where wakers do
// not write.
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

// maxWakeEntries bounds the entries of the wake directory that a wake-up
// reads, and that a waiter reads when it makes its FIFO: a directory filled
// with junk costs one bounded pass, whatever its size. A waiter that finds
// more polls instead, since its FIFO might be among those not read. It is
// far more than the processes that wait on one database at once.
const maxWakeEntries = 1024

// fifoTempAge is how old a FIFO under a temporary name must be before
// another process removes it: its maker renames it within microseconds of
// making it, unless it died in between.
const fifoTempAge = time.Minute

// dbOwner is who owns the database file, and its permission bits: the
// wake directory and its FIFOs take their owner's group and permissions
// from it.
type dbOwner struct {
	uid, gid uint32
	mode     uint32 // permission bits
}

func ownerOf(st *unix.Stat_t) dbOwner {
	return dbOwner{uid: st.Uid, gid: st.Gid, mode: st.Mode & 0o7777}
}

// wakeDirMode is the mode of a wake directory the database's owner made:
// its group's too (set-group-ID, so that each FIFO in it is the group's)
// when the group may write the database, else private.
func (o dbOwner) wakeDirMode() uint32 {
	if o.mode&0o020 != 0 {
		return 0o2770
	}
	return 0o700
}

// fifoMode is the mode of a waiter's FIFO: the database file's read and
// write bits for its owner and group, so that the users who may write the
// database may wake its waiters.
func (o dbOwner) fifoMode() uint32 { return 0o600 | o.mode&0o060 }

// errWakeDirUnsafe marks a wake directory that is not used: someone other
// than the database's owner could plant or remove entries there, or did.
var errWakeDirUnsafe = errors.New("not used")

// checkWakeDir returns an error wrapping errWakeDirUnsafe, which says why,
// unless the directory at path, with status st, belongs to root or to the
// database file's owner (who is this user or root: see checkPrivate), and
// no one outside the file's group may write it.
func checkWakeDir(path string, st *unix.Stat_t, db dbOwner) error {
	var why string
	switch {
	case st.Uid != 0 && st.Uid != db.uid:
		why = fmt.Sprintf("it is owned by uid %d, not by root or the database file's owner (uid %d)", st.Uid, db.uid)
	case st.Mode&0o002 != 0:
		why = fmt.Sprintf("every user may write it (mode %04o)", st.Mode&0o7777)
	case st.Mode&0o020 != 0 && st.Gid != db.gid:
		why = fmt.Sprintf("group %d may write it, not only the database file's group (%d)", st.Gid, db.gid)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		why = "it is not a directory"
	default:
		return nil
	}
	return fmt.Errorf("wake directory %s %w: %s (remove it: leaderrun, run as the database file's owner, makes it anew)",
		path, errWakeDirUnsafe, why)
}

// makeWakeDir makes the wake directory at path when this user owns the
// database, and gives a wake directory of this user's the database file's
// group and wakeDirMode, whatever the umask: a database file made
// group-writable after the directory was made gets a group-shared
// directory, and one that every user could write is narrowed. Another
// user's directory is left as it is, for checkWakeDir to judge; so is a
// database file of another user's (root's, in a shared directory), whose
// owner makes the wake directory.
func makeWakeDir(path string, db dbOwner) {
	if uint32(os.Geteuid()) != db.uid {
		return
	}
	if err := unix.Mkdir(path, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Uid != db.uid {
		return
	}
	mode := db.wakeDirMode()
	if mode&0o070 != 0 && st.Gid != db.gid && unix.Fchown(fd, -1, int(db.gid)) != nil {
		mode = 0o700 // not a member of the database's group
	}
	if st.Mode&0o7777 != mode {
		unix.Fchmod(fd, mode)
	}
}

// openWakeDir opens the wake directory at path, refusing a symbolic link
// and, with an error wrapping errWakeDirUnsafe, a directory checkWakeDir
// does not trust.
func openWakeDir(path string, db dbOwner) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := checkWakeDir(path, &st, db); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// isWakeName reports whether name has the form watchWake gives a FIFO: a
// pid, a dash and 16 hexadecimal digits. Nothing else in the wake
// directory is opened.
func isWakeName(name string) bool {
	pid, random, ok := strings.Cut(name, "-")
	if !ok || len(pid) == 0 || len(pid) > 10 || len(random) != 16 {
		return false
	}
	for _, c := range pid {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range random {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// wake has every process waiting on this database woken (wakeWaiters),
// on the Store's waker: the caller does not wait for it.
func (s *Store) wake() { s.waker.wake() }

// wakeWaiters tells every process waiting on this database that a name
// may have changed hands: it writes a byte to each FIFO among the first
// maxWakeEntries entries of the wake directory, when checkWakeDir trusts
// it. It follows no symbolic link, never blocks, opens only names that
// isWakeName accepts and writes only to FIFOs that have no other name (a
// file planted in the directory, or a hard link to one elsewhere, is
// opened without truncation and closed unwritten), so that nothing
// planted there can hang leaderrun or make it write elsewhere. A FIFO
// that nobody reads any more (its waiter died) is removed. It is best
// effort: a waiter that misses it still wakes at the lease's expiry. It
// never opens the database file itself.
func (s *Store) wakeWaiters() {
	if s.wakeStarted != nil {
		s.wakeStarted()
	}
	if fd, err := unix.Open(s.path+wakeSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600); err == nil {
		unix.Close(fd)
	}
	dir, err := openWakeDir(s.path+wakeDirSuffix, s.current().owner)
	if err != nil {
		s.warnWakeDir(err)
		return // nobody waits, or nobody can
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(maxWakeEntries)
	dfd := int(dir.Fd())
	for _, name := range names {
		if isWakeName(name) {
			wakeFIFO(dfd, name)
		}
	}
}

// wakeFIFO writes a byte to the FIFO name in the directory dfd, and
// removes it when nobody reads it.
func wakeFIFO(dfd int, name string) {
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENXIO) { // a FIFO without a reader: its waiter is gone
		unix.Unlinkat(dfd, name, 0)
		return
	}
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO && st.Nlink == 1 {
		unix.Write(fd, []byte{1}) // EAGAIN: a wake-up is already pending
	}
}

// warnWakeDir logs, once per Store, why the wake directory is not used,
// when err says that it is not safe to.
func (s *Store) warnWakeDir(err error) {
	if errors.Is(err, errWakeDirUnsafe) && s.opts.Logger != nil {
		s.wakeWarned.Do(func() {
			s.opts.Logger.Warn("sqlite store: waiters poll the database instead of waiting on the wake directory", "err", err)
		})
	}
}

// waker runs a Store's wake-ups on a goroutine of its own, so that the
// change of hands that asks for one returns without waiting for it:
// reading the wake directory and writing to its FIFOs is never part of a
// caller's latency. Wake-ups asked for while one runs are done once more
// after it, so none is lost; stop waits for the last.
type waker struct {
	pass func()

	mu      sync.Mutex    // guards the fields below
	kick    chan struct{} // room for one wake-up asked for; nil until the first
	done    chan struct{} // closed when the goroutine has ended
	stopped bool          // after stop, wake runs the pass on its caller
}

// wake asks for a pass: at once on the waker's goroutine, started on the
// first call, or after the pass running now.
func (w *waker) wake() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		w.pass() // a change that committed as the Store closed
		return
	}
	if w.kick == nil {
		w.kick, w.done = make(chan struct{}, 1), make(chan struct{})
		go w.run(w.kick, w.done)
	}
	select {
	case w.kick <- struct{}{}:
	default: // one is asked for already, and runs after this call
	}
	w.mu.Unlock()
}

// run passes once for each wake-up asked for, until stop.
func (w *waker) run(kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range kick {
		w.pass()
	}
}

// stop runs the wake-up asked for last, if it has not run, and ends the
// goroutine. Only the first call does anything.
func (w *waker) stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	kick, done := w.kick, w.done
	w.mu.Unlock()
	if kick != nil {
		close(kick)
		<-done
	}
}

// wakeWatch is a waiting Store's FIFO in the wake directory.
type wakeWatch struct {
	f      *os.File // open for reading and writing, non-blocking, so Close ends a Read
	dir    *os.File
	name   string
	closed sync.Once
}

// watchWake makes this Store's FIFO in the wake directory at dirPath,
// which it first makes when the database file's owner db is this user
// (makeWakeDir). It fails when checkWakeDir does not trust the directory,
// or when the directory holds more than maxWakeEntries entries, with an
// error wrapping errWakeDirUnsafe. The FIFO is open before it appears
// under its final name: a waker that finds a final name without a reader
// may remove it.
func watchWake(dirPath string, db dbOwner) (*wakeWatch, error) {
	makeWakeDir(dirPath, db)
	dir, err := openWakeDir(dirPath, db)
	if err != nil {
		return nil, err
	}
	if clearStaleTemps(dir) {
		dir.Close()
		return nil, fmt.Errorf("wake directory %s %w: it holds more than %d entries, and wake-ups read no more (remove what is not leaderrun's)",
			dirPath, errWakeDirUnsafe, maxWakeEntries)
	}
	dfd := int(dir.Fd())
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
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Gid != db.gid {
			unix.Fchown(fd, -1, int(db.gid)) // best effort: the group may not be this user's
		}
		err = unix.Fchmod(fd, db.fifoMode())
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
// before giving them their final names, among its first maxWakeEntries
// entries, and reports whether it holds more.
func clearStaleTemps(dir *os.File) (full bool) {
	names, _ := dir.Readdirnames(maxWakeEntries + 1)
	if len(names) > maxWakeEntries {
		return true
	}
	dfd := int(dir.Fd())
	for _, name := range names {
		temp, ok := strings.CutPrefix(name, ".")
		var st unix.Stat_t
		if !ok || !isWakeName(temp) || unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) > fifoTempAge {
			unix.Unlinkat(dfd, name, 0)
		}
	}
	return false
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
